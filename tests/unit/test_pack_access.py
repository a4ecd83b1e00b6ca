"""A pack running as root reads only from trees root alone controls, and links planted in a
user's DEST reach nothing outside it (written or chowned)."""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path

import pytest

from diskinfo import cli
from diskinfo.errors import UserError
from diskinfo.shards.pack import pack, scan, shard_name, write_shard
from diskinfo.shards.pack.access import source_owner

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root packs a user's tree")
USER = 1234


def _secret(open_tmp_path: Path) -> Path:
    secret = open_tmp_path / "shadow"
    secret.write_text("root:$y$secret\n")
    secret.chmod(0o600)
    return secret


def _user_tree(open_tmp_path: Path) -> Path:
    src = open_tmp_path / "src"
    (src / "a").mkdir(parents=True)
    for i in range(3):
        (src / "a" / f"{i}.txt").write_text(f"{i}\n")
    for path in (src, src / "a", *(src / "a").iterdir()):
        os.lchown(path, USER, USER)
    return src


def _shard_bytes(dest: Path) -> bytes:
    return b"".join(p.read_bytes() for p in dest.glob("shard-*.tar"))


def test_a_users_src_is_refused_before_anything_is_read(open_tmp_path):
    """Run as root (in-process here; the program becomes NB_USER first), a SRC another account
    can write is refused: its links could lead anywhere root can read."""
    src = _user_tree(open_tmp_path)
    (src / "a" / "9.txt").symlink_to(_secret(open_tmp_path))
    with pytest.raises(UserError, match=f"cannot read {src}: {src} is writable by an account"):
        pack(src, open_tmp_path / "out")
    assert not (open_tmp_path / "out").exists()


def _root_tree(open_tmp_path: Path) -> Path:
    src = open_tmp_path / "rootsrc"
    (src / "a").mkdir(parents=True)
    for i in range(3):
        (src / "a" / f"{i}.txt").write_text(f"{i}\n")
    return src


def test_a_link_out_of_roots_src_into_a_users_tree_is_refused(open_tmp_path):
    users = _user_tree(open_tmp_path)  # the user may swap its files for links at any time
    src = _root_tree(open_tmp_path)
    (src / "a" / "9.txt").symlink_to(users / "a" / "0.txt")
    with pytest.raises(UserError, match=r"9\.txt: \S+/src is writable by an account other than"):
        pack(src, open_tmp_path / "out")
    (src / "a" / "9.txt").unlink()
    (src / "b").symlink_to(users / "a")  # a class folder that is the user's
    with pytest.raises(UserError, match="writable by an account other than root"):
        pack(src, open_tmp_path / "out")


def test_a_link_swapped_after_the_scan_is_judged_when_opened(open_tmp_path):
    """The scan saw a root file; by the read, the link leads into a user's folder."""
    users = _user_tree(open_tmp_path)
    src = _root_tree(open_tmp_path)
    benign = open_tmp_path / "benign.txt"
    benign.write_text("0\n")
    (src / "a" / "9.txt").symlink_to(benign)
    found = scan(src, None, source_owner(src))
    (src / "a" / "9.txt").unlink()
    (src / "a" / "9.txt").symlink_to(users / "a" / "0.txt")  # same size: only the open can tell
    dest = open_tmp_path / "out"
    dest.mkdir()
    with pytest.raises(UserError, match="writable by an account other than root"):
        write_shard(dest, shard_name(0), found.samples, source_owner(src))
    assert os.listdir(dest) == []


def test_roots_own_files_are_packed_links_included(open_tmp_path):
    src = _root_tree(open_tmp_path)
    shared = open_tmp_path / "shared.txt"
    shared.write_text("public\n")
    (src / "a" / "9.txt").symlink_to(shared)
    manifest = pack(src, open_tmp_path / "out")
    assert manifest["samples"] == 4
    assert b"public" in _shard_bytes(open_tmp_path / "out")


def test_a_planted_temporary_shard_name_is_never_followed(open_tmp_path):
    target = open_tmp_path / "healthcheck.sh"
    target.write_text("#!/bin/sh\nexit 0\n")
    target.chmod(0o755)
    src = _user_tree(open_tmp_path)
    dest = open_tmp_path / "out"
    dest.mkdir()
    os.chown(dest, USER, USER)
    (dest / f".{shard_name(0)}.tmp").symlink_to(target)  # the name the old writer opened
    write_shard(dest, shard_name(0), scan(src).samples)
    st = target.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    assert target.read_text() == "#!/bin/sh\nexit 0\n"
    shard = dest / shard_name(0)
    assert shard.stat().st_uid == USER and not shard.is_symlink()
    with tarfile.open(shard) as tar:
        assert len(tar.getnames()) == 6  # 3 files and their class labels


def test_control_characters_in_names_are_escaped_in_errors(open_tmp_path, capsys):
    src = open_tmp_path / "src"
    src.mkdir()
    (src / "x\x1b[2J.jpg").write_text("1")
    (src / "x\x1b[2J.JPG").write_text("2")  # a case clash: an error that names the file
    assert cli.main(["pack", str(src), str(open_tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[2J" in err, err
    assert len(err.splitlines()) == 1
