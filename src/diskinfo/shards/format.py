"""What a `diskinfo pack` shard and its manifest are: the one place that says it.

A shard is a POSIX tar (`shard_name`) of samples. A sample is the run of consecutive members
that share a key; a member is named `KEY.EXT` (`member_name`), the key ending at the
basename's first dot (`split_name`), as webdataset reads it. A sample's class is an integer,
the index of its class folder in the manifest's sorted `classes`, and goes either in the key
alone (`LABEL_KEY`, the default: the key's top folder is the class folder and the reader looks
the value up in the manifest, `class_values`) or as a `KEY.cls` member too (`LABEL_MEMBER`);
either way a reader hands it out as the `CLASS` value, the bytes `label_bytes` spells.

The manifest (`MANIFEST` in the pack's folder) is JSON, read by `Manifest.read` and written by
`Manifest.write`, nowhere else; `FORMAT` names its layout and version. A change to what is on
disk changes this module, the writer's emit (`pack/shard.py`) and the reader's parse
(`dataset.read_shard`), and the golden pack in tests/fixtures/shards, which pins the bytes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from diskinfo.errors import UserError
from diskinfo.fileio import write_atomic

FORMAT = "diskinfo.pack/1"  # the manifest's `format`: its name and version
_FAMILY, _, _VERSION = FORMAT.partition("/")
MANIFEST = "manifest.json"
CLASS = "cls"  # the member extension, and the sample's key, that hold the class
# where a sample's class goes (`--labels`): only the key's folder ("cat/0001"), which
# ShardDataset maps to the same `cls` from the manifest (the default: on small samples a
# `cls` member is a second header and block per sample, a sixth of the shards and of what
# the reader walks); or a `cls` member as well, as webdataset's `to_tuple(..., "cls")` reads it
LABEL_MEMBER, LABEL_KEY = "member", "key"
LABELS = (LABEL_MEMBER, LABEL_KEY)


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.tar"


def member_name(key: str, ext: str) -> str:
    return f"{key}.{ext}"


def split_name(name: str) -> tuple[str, str]:
    """'cat/0001.seg.png' -> ('cat/0001', 'seg.png'): the key ends at the basename's first dot,
    as in webdataset's base_plus_ext."""
    dot = name.find(".", name.rfind("/") + 1)
    return (name, "") if dot < 0 else (name[:dot], name[dot + 1 :].lower())


def class_folder(key: str) -> str:
    """The class folder of a key (its top folder); ValueError for a key in none."""
    return key[: key.index("/")]


def label_bytes(label: int) -> bytes:
    """A class as a reader hands it out, and as a `cls` member holds it."""
    return str(label).encode()


def class_values(manifest: Mapping[str, Any] | None) -> dict[str, bytes] | None:
    """For a pack made with `--labels key`: each class folder's `cls` value, as the member
    would have held it (the index in the manifest's sorted `classes`); None otherwise."""
    if manifest is None or manifest.get("labels") != LABEL_KEY or not manifest.get("classes"):
        return None
    return {name: label_bytes(i) for i, name in enumerate(manifest["classes"])}


@dataclass(frozen=True)
class ShardEntry:
    """One shard as the manifest lists it, in order."""

    name: str
    samples: int
    bytes: int
    sha256: str
    first_key: str | None = None
    last_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class Manifest(Mapping[str, Any]):
    """A finished pack's manifest. Also a read-only mapping of its JSON, as `read_manifest`
    returned a dict before it was typed: `manifest["shards"][0]["name"]` still reads."""

    format: str = FORMAT
    source: str = ""
    created: str = ""
    samples: int
    bytes: int = 0
    classes: list[str] = field(default_factory=list)
    labels: str = LABEL_MEMBER  # a pack from before `--labels` wrote members
    class_counts: dict[str, int] = field(default_factory=dict)
    extensions: dict[str, int] = field(default_factory=dict)
    order: str = ""
    shuffle_seed: int | None = None
    shard_rule: str = ""
    readers: int | None = None
    shard_size: int | None = None
    samples_per_shard: list[int] = field(default_factory=list)
    mixing: dict[str, Any] | None = None
    checksum: str = ""
    skipped: dict[str, int] = field(default_factory=dict)
    shards: list[ShardEntry]

    @classmethod
    def from_json(cls, data: Any, where: str = "the manifest") -> Manifest:
        """One-line UserError for a manifest of another program, of a newer format, or with
        a shard count or name that cannot be one."""
        if not isinstance(data, dict) or not isinstance(data.get("format"), str):
            raise UserError(f"{where} is not a diskinfo pack manifest")
        family, _, version = data["format"].partition("/")
        if family != _FAMILY:
            raise UserError(f"{where} is not a diskinfo pack manifest")
        if version != _VERSION:
            raise UserError(
                f"{where} is format {data['format']}; this diskinfo reads {FORMAT}: "
                "repack with this version, or read it with the diskinfo that wrote it"
            )
        known = {f.name for f in fields(cls)} - {"shards"}
        try:
            shards = [ShardEntry(**s) for s in data["shards"]]
            manifest = cls(**{k: v for k, v in data.items() if k in known}, shards=shards)
        except (KeyError, TypeError) as exc:
            raise UserError(f"{where}: a damaged diskinfo pack manifest ({exc})") from None
        counts = [manifest.samples] + [s.samples for s in shards]
        names = [s.name for s in shards]
        if not all(type(n) is int and n >= 0 for n in counts) or not all(
            type(n) is str and n and "/" not in n for n in names
        ):
            raise UserError(f"{where}: a damaged diskinfo pack manifest (a count or shard name)")
        return manifest

    @classmethod
    def read(cls, dest: str | Path) -> Manifest:
        """The manifest of a finished pack (DEST or DEST/manifest.json), one-line error
        otherwise."""
        path = Path(dest)
        if path.is_dir():
            path = path / MANIFEST
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(
                f"no {MANIFEST} at {path}: not a finished `diskinfo pack` output"
            ) from None
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read {path}: {exc}") from None
        return cls.from_json(data, str(path))

    def to_json(self) -> dict[str, Any]:
        return self._json

    def write(self, dest: Path) -> None:
        """DEST/manifest.json, atomically and durably: written last, it marks a finished pack."""
        text = json.dumps(self._json, indent=1) + "\n"
        write_atomic(dest / MANIFEST, text, durable=True, owned=True)

    @functools.cached_property
    def _json(self) -> dict[str, Any]:
        return asdict(self)

    def __getitem__(self, key: str) -> Any:
        return self._json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)

    def __len__(self) -> int:
        return len(self._json)


def read_manifest(dest: str | Path) -> Manifest:
    """The manifest of a finished pack (DEST or DEST/manifest.json), one-line error otherwise."""
    return Manifest.read(dest)
