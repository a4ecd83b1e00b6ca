"""Walk SRC and group its files into samples, the way WebDataset groups tar members.

- a sample is every file of one directory that shares a stem (the name up to its first dot):
  `0001.jpg` + `0001.json` -> key `0001`, members `0001.jpg` and `0001.json`;
- ImageFolder layout (every sample below a top-level directory): that directory is the class,
  numbered by sorted name as torchvision's ImageFolder numbers them (`--labels member`: each
  sample gets a `cls` member with the number too); files directly in SRC: no classes.
  Files beside the class directories (labels.csv, README.md) are left out and counted, as
  ImageFolder leaves them out, unless one is of a kind the classes hold (a `.jpg` beside
  class directories of `.jpg`s): that would be a sample without a class, an error;
- hidden files, files without an extension and non-regular files (FIFOs, sockets, devices)
  are skipped, and counted in the manifest;
- symbolic links are followed, to directories too, as ImageFolder follows them (a class that
  is a link to a directory elsewhere is a class, numbered among the others); a link back to a
  directory above it is an error, not an endless walk. Run as root, a link (or anything
  else) leading out of the trees root alone controls is an error (`access`), never packed.

Memory does not grow with SRC: each directory is read as it is listed (a folder of a million
files is never a list), and the files are sorted into key order on disk (`runs`), where the
samples stay (`SampleList`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from diskinfo.errors import UserError
from diskinfo.shards.format import CLASS, class_folder, label_bytes, member_name
from diskinfo.shards.pack.access import Owner, check_dir, check_file
from diskinfo.shards.pack.extsort import Records, merged

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


class SampleList:
    """The samples in key order, on disk (`runs.Records`): iterating reads them back."""

    def __init__(self, records: Records) -> None:
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Sample]:
        for key, label, members in self.records:
            yield Sample(key, [Member(*m) for m in members], label)

    def raw(self) -> Iterator[tuple[str, int | None, list[tuple[str, str, int, int, int]]]]:
        """(key, label, [(ext, path, size, mtime, ino), ...]): the same, without objects."""
        return iter(self.records)


@dataclass
class Scan:
    samples: SampleList
    classes: list[str]
    skipped_hidden: int = 0
    skipped_no_extension: int = 0
    skipped_special: int = 0
    skipped_top_level: int = 0  # files beside the class directories
    nbytes: int = 0
    class_counts: dict[str, int] = field(default_factory=dict)
    extensions: dict[str, int] = field(default_factory=dict)
    digest: str = ""  # of every sample's key, label and members' names, sizes and mtimes

    def __enter__(self) -> Scan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.samples.records.close()  # the temporary file the samples are kept in


def tar_size(sample: Sample, label_member: bool = True) -> int:
    """Bytes the sample takes in a tar: one header per member plus data padded to 512.
    `label_member`: the class goes in as a `cls` member (`--labels member`)."""
    total = 0
    parts = [(member_name(sample.key, m.ext), m.size) for m in sample.members]
    if sample.label is not None and label_member:
        parts.append((member_name(sample.key, CLASS), len(label_bytes(sample.label))))
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


Record = tuple[str, str, str, int, int, int]  # key, ext, path, size, mtime, inode


def scan(
    src: Path, dest: Path | None = None, owner: Owner | None = None, where: Path | None = None
) -> Scan:
    """Walk SRC and group files into samples in key order (see the module docstring).
    `dest`: refused if a link in SRC leads to it (a second run would pack its shards).
    `owner`: the rule a pack running as root reads by (`access.source_owner`). `where`: the
    folder of the temporary files the samples are sorted and kept in (`runs`)."""
    walk = _Walk(src, dest, owner)
    kept = Records(where)
    try:
        _group(merged(walk.files(), where), walk, kept)
    except BaseException:
        kept.close()
        raise
    return walk.found(SampleList(kept))


class _Walk:
    """SRC's directories one at a time, depth first in name order, each read as it is listed
    (a folder of a million files is never a list; its subfolders' names are), with what the
    walk learns on the way: the classes, the kinds of
    file they hold, the files at the top level, what was skipped."""

    def __init__(self, src: Path, dest: Path | None, owner: Owner | None) -> None:
        self.src, self.dest, self.owner = src, dest, owner
        self.real_dest = dest.resolve() if dest is not None else None
        self.hidden = self.no_ext = self.special = 0
        self.files_seen = 0
        self.classes: set[str] = set()
        self.kinds: set[str] = set()  # last suffixes of the files below the top level
        self.top = 0  # files at the top level
        self.top_kinds: dict[str, str] = {}  # their last suffixes -> the first path by name
        self.beside = False  # top-level files are left out: there are class directories
        self.nbytes = 0
        self.class_counts: Counter[str] = Counter()
        self.extensions: Counter[str] = Counter()
        self.digest = ""

    def files(self) -> Iterator[Record]:
        # each pending directory carries the (device, inode) of every directory from SRC
        # down to it, to stop a loop
        top = str(self.src)
        pending: list[tuple[str, str, tuple[tuple[int, int], ...]]] = [(top, "", (dir_id(top),))]
        while pending:
            dirpath, prefix, chain = pending.pop()
            try:
                listing = os.scandir(dirpath)
            except OSError as exc:
                raise UserError(f"cannot read {exc.filename or dirpath}: {exc.strerror}") from None
            subdirs: list[str] = []
            with listing:
                while True:
                    try:
                        entry = next(listing, None)
                    except OSError as exc:
                        raise UserError(f"cannot read {dirpath}: {exc.strerror}") from None
                    if entry is None:
                        break
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False  # as os.walk: then a file, whose stat below says why
                    if is_dir:
                        if entry.name.startswith("."):
                            self.hidden += 1
                        else:
                            subdirs.append(entry.name)
                    elif (record := self._file(entry.name, entry.path, prefix)) is not None:
                        yield record
            # in name order, as os.walk with sorted names went: the same error comes first
            children = [
                self._child(os.path.join(dirpath, name), prefix + name, chain)
                for name in sorted(subdirs)
            ]
            pending.extend(reversed(children))

    def _child(
        self, child: str, rel: str, here: tuple[tuple[int, int], ...]
    ) -> tuple[str, str, tuple[tuple[int, int], ...]]:
        check_dir(child, self.owner)
        child_id = dir_id(child)
        if child_id in here:
            raise UserError(
                f"{child} links back to {os.path.realpath(child)}, a directory it is in: "
                "remove the link or pack a directory without the loop"
            )
        if self.real_dest is not None and os.path.islink(child):
            real = Path(os.path.realpath(child))
            if real == self.real_dest or real in self.real_dest.parents:
                raise UserError(
                    f"DEST {self.dest} is inside SRC {self.src} through the link {child}: "
                    "the shards would be packed into themselves"
                )
        return child, rel + "/", (*here, child_id)

    def _file(self, name: str, path: str, prefix: str) -> Record | None:
        if name.startswith("."):
            self.hidden += 1
            return None
        stem, _, ext = name.partition(".")
        if not ext:
            self.no_ext += 1
            return None
        try:
            st = os.stat(path)
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            self.special += 1  # FIFOs, sockets, devices: opening a FIFO would hang
            return None
        check_file(path, st, self.owner)
        if not os.access(path, os.R_OK):
            raise UserError(f"cannot read {path}: Permission denied")
        self.files_seen += 1
        kind = ext.rpartition(".")[2].lower()
        if prefix:
            self.classes.add(class_folder(prefix))
            self.kinds.add(kind)
        else:
            self.top += 1
            if kind not in self.top_kinds or path < self.top_kinds[kind]:
                self.top_kinds[kind] = path
        return prefix + stem, ext, path, st.st_size, int(st.st_mtime), st.st_ino

    def settle(self) -> None:
        """After the walk: no samples, or files beside the classes of a kind the classes
        hold (a sample without a class), are one-line errors; other such files are left out,
        as ImageFolder leaves them out."""
        if not self.files_seen:
            raise UserError(f"no samples in {self.src}: no non-hidden files with an extension")
        if self.classes and self.top:
            alike = sorted(path for kind, path in self.top_kinds.items() if kind in self.kinds)
            if alike:
                kind = alike[0].rpartition(".")[2].lower()
                raise UserError(
                    f"{self.src} has a .{kind} file at its top level ({alike[0]}) beside "
                    f"class directories that hold .{kind} files: a sample without a class; "
                    "move it into a class directory or pack a subdirectory"
                )
            self.beside = True

    def found(self, samples: SampleList) -> Scan:
        return Scan(
            samples,
            sorted(self.classes),
            self.hidden,
            self.no_ext,
            self.special,
            self.top if self.beside else 0,
            self.nbytes,
            {name: self.class_counts[name] for name in sorted(self.classes)},
            dict(sorted(self.extensions.items())),
            self.digest,
        )


def _group(records: Iterator[Record], walk: _Walk, out: Records) -> None:
    """Sorted files -> samples (consecutive files of one key), checked and labelled, into
    `out`; the scan's totals on the way."""
    first = next(records, None)  # the walk is over once the first sorted file comes out
    walk.settle()
    index = {name: i for i, name in enumerate(sorted(walk.classes))}
    digest = hashlib.sha256()
    class_counts: Counter[str] = Counter()
    extensions: Counter[str] = Counter()
    nbytes = 0
    key: str | None = None
    members: list[tuple[str, str, int, int, int]] = []

    def close() -> None:
        nonlocal nbytes
        if key is None or (walk.beside and "/" not in key):
            return  # a file beside the class directories: left out
        label = None
        if index:
            if any(m[0].lower() == CLASS for m in members):
                raise UserError(f"sample {key} has a .{CLASS} file, a name reserved for the class")
            cls = class_folder(key)
            label = index[cls]
            class_counts[cls] += 1
        sample = (key, label, members)
        out.add(sample)
        digest.update(repr((key, label, [(m[0], m[2], m[3]) for m in members])).encode())
        for m in members:
            extensions[m[0]] += 1
            nbytes += m[2]

    for record in itertools.chain([first] if first is not None else [], records):
        name, ext, path, size, mtime, ino = record
        if name != key:
            close()
            key, members = name, []
        elif any(m[0].lower() == ext.lower() for m in members):
            raise UserError(f"two files of sample {key} differ only in case: {path}")
        members.append((ext, path, size, mtime, ino))
    close()
    walk.nbytes, walk.class_counts, walk.extensions = nbytes, class_counts, extensions
    walk.digest = digest.hexdigest()
