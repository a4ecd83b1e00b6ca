"""Files written in a folder another user controls: with real links, planted names and a racing
thread that swaps our temporary file for a link, nothing outside the folder changes."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path

import pytest

from diskinfo import fileio
from diskinfo.fileio import make_dirs, read_regular, write_atomic

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="root writes into a user's folder")


def _target(tmp_path: Path) -> Path:
    """A root-only file outside the user's folder, as the SSH host key is."""
    target = tmp_path / "host_key"
    target.write_text("secret\n")
    target.chmod(0o600)
    return target


def _unchanged(target: Path) -> None:
    st = target.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, target.read_text()) == (0o600, 0, "secret\n")


class Swapper(threading.Thread):
    """The user's loop: every temporary file of ours that appears is replaced by a link."""

    def __init__(self, folder: Path, prefix: str, target: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.prefix, self.target = folder, prefix, target
        self.stop, self.swaps = threading.Event(), 0

    def run(self) -> None:
        while not self.stop.is_set():
            for name in os.listdir(self.folder):
                path = self.folder / name
                if name.startswith(self.prefix) and name.endswith(".tmp") and not path.is_symlink():
                    try:
                        path.unlink()
                        path.symlink_to(self.target)
                        self.swaps += 1
                    except OSError:
                        pass


@needs_root
def test_write_atomic_never_chmods_or_chowns_through_a_swapped_link(tmp_path):
    target = _target(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, 1234, 1234)  # the user's folder
    swapper = Swapper(logs, ".baseline.json.", target)
    swapper.start()
    try:
        for _ in range(300):
            # the user may remove our file before the rename: their folder, their loss
            with contextlib.suppress(FileNotFoundError):
                write_atomic(logs / "baseline.json", "{}\n", durable=True, owned=True)
            _unchanged(target)
    finally:
        swapper.stop.set()
        swapper.join()
    assert swapper.swaps > 0  # the race was run, not missed


def test_write_atomic_never_opens_a_planted_name(tmp_path, monkeypatch):
    target = _target(tmp_path)
    names = iter(["planted", "free"])
    monkeypatch.setattr(fileio, "_random_part", lambda: next(names))
    (tmp_path / ".state.json.planted.tmp").symlink_to(target)
    write_atomic(tmp_path / "state.json", "new\n", mode=0o644)
    _unchanged(target)
    assert (tmp_path / "state.json").read_text() == "new\n"
    assert stat.S_IMODE((tmp_path / "state.json").stat().st_mode) == 0o644


def test_write_atomic_replaces_a_link_at_the_name_itself(tmp_path):
    target = _target(tmp_path)
    (tmp_path / "table.json").symlink_to(target)
    write_atomic(tmp_path / "table.json", "{}\n")
    _unchanged(target)
    assert not (tmp_path / "table.json").is_symlink()


def test_write_atomic_leaves_no_temporary_file_on_failure(tmp_path):
    with pytest.raises(TypeError):
        write_atomic(tmp_path / "x.json", 42)  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


@needs_root
def test_make_dirs_gives_new_directories_the_owner_of_their_parent(tmp_path):
    os.chown(tmp_path, 1234, 1234)
    make_dirs(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").stat().st_uid == 1234 == (tmp_path / "a").stat().st_uid


def test_read_regular_refuses_links_fifos_and_floods(tmp_path):
    (tmp_path / "ok.json").write_text("{}")
    assert read_regular(tmp_path / "ok.json", 10) == b"{}"
    (tmp_path / "link.json").symlink_to(tmp_path / "ok.json")
    os.mkfifo(tmp_path / "fifo.json")  # a blocking open would hang here
    (tmp_path / "big.json").write_bytes(b"x" * 11)
    for name in ("link.json", "fifo.json", "big.json"):
        with pytest.raises(OSError):
            read_regular(tmp_path / name, 10)


@needs_root
def test_not_root_only_names_the_first_part_another_account_controls(open_tmp_path):
    not_root_only = fileio.not_root_only
    root_dir = open_tmp_path / "root"
    root_dir.mkdir()
    users = open_tmp_path / "users"
    users.mkdir()
    os.chown(users, 1234, 1234)
    (users / "to-root").symlink_to(root_dir)  # the user's link to root's folder
    (root_dir / "to-users").symlink_to(users)  # root's link into the user's folder
    shared = open_tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    os.chown(shared, 0, 1234)  # group-writable by another group
    fifo = root_dir / "fifo"
    os.mkfifo(fifo)
    assert not_root_only(root_dir) is None
    assert not_root_only(root_dir / "not-yet" / "made") is None  # made in root's folder
    assert not_root_only(fifo) is None  # looked at, never opened: no block
    assert not_root_only(users / "x") == str(users)
    assert not_root_only(users / "to-root" / "x") == str(users)  # the link could be swapped
    assert not_root_only(root_dir / "to-users" / "x") == str(users)  # where it leads
    assert not_root_only(shared) == str(shared)
    assert not_root_only("/tmp") == "/tmp"  # everyone may write there
    assert not_root_only("/tmp/made-here-later") == "/tmp"  # someone could make it first
    assert not_root_only(open_tmp_path) is None  # root's folder in sticky /tmp
    assert not_root_only("/") is None
