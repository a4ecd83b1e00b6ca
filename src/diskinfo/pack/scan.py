"""Walk SRC and group its files into samples, the way WebDataset groups tar members.

- a sample is every file of one directory that shares a stem (the name up to its first dot):
  `0001.jpg` + `0001.json` -> key `0001`, members `0001.jpg` and `0001.json`;
- ImageFolder layout (every sample below a top-level directory): that directory is the class,
  and each sample gets a `cls` member with the class index (sorted names, as torchvision's
  ImageFolder numbers them); files directly in SRC: no classes. Files beside the class
  directories (labels.csv, README.md) are left out and counted, as ImageFolder leaves them
  out, unless one is of a kind the classes hold (a `.jpg` beside class directories of
  `.jpg`s): that would be a sample without a class, an error;
- hidden files, files without an extension and non-regular files (FIFOs, sockets, devices)
  are skipped, and counted in the manifest;
- symbolic links are followed, to directories too, as ImageFolder follows them (a class that
  is a link to a directory elsewhere is a class, numbered among the others); a link back to a
  directory above it is an error, not an endless walk. Run as root on a SRC another user owns,
  a link (or anything else) leading to what that owner may not read is an error
  (`access`), never packed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from diskinfo.errors import UserError
from diskinfo.pack.access import Owner, check_dir, check_file

BLOCK = 512  # a tar header, and the unit tar pads member data to


@dataclass(frozen=True, slots=True)
class Member:
    """One source file of a sample; `ext` is everything after the stem ("jpg", "seg.png").
    `ino`: the order to read SRC in (`spill`); not part of what is packed."""

    ext: str
    path: str
    size: int
    mtime: int
    ino: int = 0


@dataclass(slots=True)
class Sample:
    key: str  # relative directory + stem, POSIX separators: "cat/0001"
    members: list[Member] = field(default_factory=list)
    label: int | None = None

    @property
    def nbytes(self) -> int:
        return sum(m.size for m in self.members)


@dataclass
class Scan:
    samples: list[Sample]
    classes: list[str]
    skipped_hidden: int = 0
    skipped_no_extension: int = 0
    skipped_special: int = 0
    skipped_top_level: int = 0  # files beside the class directories


def label_bytes(label: int) -> bytes:
    return str(label).encode()


def tar_size(sample: Sample) -> int:
    """Bytes the sample takes in a tar: one header per member plus data padded to 512."""
    total = 0
    parts = [(f"{sample.key}.{m.ext}", m.size) for m in sample.members]
    if sample.label is not None:
        parts.append((f"{sample.key}.cls", len(label_bytes(sample.label))))
    for name, size in parts:
        long_name = len(name.encode()) > 100 or not name.isascii()
        total += BLOCK * (3 if long_name else 1) + -(-size // BLOCK) * BLOCK
    return total


def check_paths(src: Path, dest: Path) -> None:
    if not src.is_dir():
        raise UserError(f"SRC is not a directory: {src}")
    real_src, real_dest = src.resolve(), dest.resolve()
    if real_dest == real_src or real_src in real_dest.parents:
        raise UserError(
            f"DEST {dest} is inside SRC {src}: the shards would be packed into themselves"
        )


def dir_id(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    return st.st_dev, st.st_ino


def scan(src: Path, dest: Path | None = None, owner: Owner | None = None) -> Scan:
    """Walk SRC in sorted order and group files into samples (see the module docstring).
    `dest`: refused if a link in SRC leads to it (a second run would pack its shards).
    `owner`: whose read access bounds what is packed (`access.source_owner`)."""
    real_dest = dest.resolve() if dest is not None else None
    groups: dict[str, Sample] = {}
    hidden = no_ext = special = 0

    def fail(exc: OSError) -> None:
        raise UserError(f"cannot read {exc.filename}: {exc.strerror}")

    # (device, inode) of each directory from SRC down to and including the one walked, to stop
    # a loop; a child's chain is made (one stat) when its parent lists it
    chains: dict[str, tuple[tuple[int, int], ...]] = {}
    for dirpath, dirnames, filenames in os.walk(src, onerror=fail, followlinks=True):
        hidden += sum(1 for d in dirnames if d.startswith("."))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = chains.pop(dirpath, None) or (dir_id(dirpath),)
        for d in dirnames:
            child = os.path.join(dirpath, d)
            check_dir(child, owner)
            child_id = dir_id(child)
            if child_id in here:
                raise UserError(
                    f"{child} links back to {os.path.realpath(child)}, a directory it is in: "
                    "remove the link or pack a directory without the loop"
                )
            if real_dest is not None and os.path.islink(child):
                real = Path(os.path.realpath(child))
                if real == real_dest or real in real_dest.parents:
                    raise UserError(
                        f"DEST {dest} is inside SRC {src} through the link {child}: "
                        "the shards would be packed into themselves"
                    )
            chains[child] = (*here, child_id)
        rel = Path(dirpath).relative_to(src).as_posix()
        prefix = "" if rel == "." else rel + "/"
        for name in sorted(filenames):
            if name.startswith("."):
                hidden += 1
                continue
            stem, _, ext = name.partition(".")
            if not ext:
                no_ext += 1
                continue
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except OSError as exc:
                raise UserError(f"cannot read {path}: {exc.strerror}") from None
            if not stat.S_ISREG(st.st_mode):
                special += 1  # FIFOs, sockets, devices: opening a FIFO would hang
                continue
            check_file(path, st, owner)
            if not os.access(path, os.R_OK):
                raise UserError(f"cannot read {path}: Permission denied")
            key = prefix + stem
            sample = groups.setdefault(key, Sample(key))
            if any(m.ext.lower() == ext.lower() for m in sample.members):
                raise UserError(f"two files of sample {key} differ only in case: {path}")
            sample.members.append(Member(ext, path, st.st_size, int(st.st_mtime), st.st_ino))
    samples = sorted(groups.values(), key=lambda s: s.key)
    if not samples:
        raise UserError(f"no samples in {src}: no non-hidden files with an extension")
    nested = [s for s in samples if "/" in s.key]
    top_level = 0
    classes: list[str] = []
    if nested and len(nested) != len(samples):
        samples, top_level = nested, _beside_classes(src, samples, nested)
    if nested:
        classes = sorted({s.key.split("/", 1)[0] for s in samples})
        index = {name: i for i, name in enumerate(classes)}
        for s in samples:
            if any(m.ext.lower() == "cls" for m in s.members):
                raise UserError(f"sample {s.key} has a .cls file, a name reserved for the class")
            s.label = index[s.key.split("/", 1)[0]]
    return Scan(samples, classes, hidden, no_ext, special, top_level)


def _suffix(member: Member) -> str:
    return member.ext.rpartition(".")[2].lower()


def _beside_classes(src: Path, samples: list[Sample], nested: list[Sample]) -> int:
    """How many files SRC's top level holds, which ImageFolder ignores, when none is of a kind
    (last suffix) that the class directories hold; otherwise a one-line error."""
    kinds = {_suffix(m) for s in nested for m in s.members}
    top = [m for s in samples if "/" not in s.key for m in s.members]
    alike = next((m for m in top if _suffix(m) in kinds), None)
    if alike is not None:
        raise UserError(
            f"{src} has a .{_suffix(alike)} file at its top level ({alike.path}) beside class "
            f"directories that hold .{_suffix(alike)} files: a sample without a class; move it "
            "into a class directory or pack a subdirectory"
        )
    return len(top)
