"""Pure-Python wheels made in a test, for offline `pip install --no-index` in a container."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    requires: tuple[str, ...] = (),
    entry_points: str = "",
) -> Path:
    """DIRECTORY/name-version-py3-none-any.whl holding `files` (paths inside the wheel), with
    Requires-Dist lines for `requires`; world-readable, as the container's user reads it."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        **files,
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    if entry_points:
        files[f"{info}/entry_points.txt"] = entry_points.encode()

    def digest(data: bytes) -> str:
        raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"sha256={raw}"

    record = "".join(f"{path},{digest(data)},{len(data)}\n" for path, data in files.items())
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for member, data in files.items():
            z.writestr(member, data)
        z.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    path.chmod(0o644)
    directory.chmod(0o755)
    return path
