"""`from diskinfo.pack import pack, read_manifest`, as users import them; the writer lives in
diskinfo.shards.pack."""

from diskinfo.shards.pack import MANIFEST, STATE, pack, read_manifest, verify

__all__ = ["MANIFEST", "STATE", "pack", "read_manifest", "verify"]
