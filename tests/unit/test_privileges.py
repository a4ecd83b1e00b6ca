"""`diskinfo` started as root: who it runs as is decided by identity (NB_USER in the account
database), never by the paths it is given; kept root on purpose (--as-root) or on a host
without NB_USER, it refuses every path another account could write. Each run is a real
process, as root, with real folders of another uid and real links."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


def _everyone_may_run(python: str) -> bool:
    """Whether another user could run `python`: every folder on its real path searchable."""
    real = Path(os.path.realpath(python))
    return real.exists() and all(os.stat(p).st_mode & 0o001 for p in real.parents)


# The interpreter must be one the dropped user can run: a root-only pyenv or venv is not.
PYTHON = next((p for p in ("/usr/bin/python3", sys.executable) if _everyone_may_run(p)), None)
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="dropping root needs root"),
    pytest.mark.skipif(PYTHON is None, reason="no Python every user may run"),
]
OTHER = 1234  # a uid with no account: a user's folder
NOBODY = pwd.getpwnam("nobody")
DROPPED = (
    f"diskinfo: running as nobody (uid {NOBODY.pw_uid}): a verb started as root runs as NB_USER"
)


def _diskinfo(*args: str, cwd: str = "/", **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("NB_USER", "SUDO_UID")}
    base.pop("DISKINFO_AS_ROOT", None)
    return subprocess.run(
        [str(PYTHON), "-m", "diskinfo.cli", *args],
        capture_output=True,
        text=True,
        env={**base, "PYTHONPATH": str(ROOT / "src"), **env},
        timeout=120,
        cwd=cwd,
    )


def _tree(where: Path) -> Path:
    src = where / "src"
    src.mkdir()
    for i in range(3):
        (src / f"{i}.txt").write_text(f"{i}\n")
    return src


def _users_folder(where: Path) -> Path:
    users = where / "users"
    users.mkdir()
    os.chown(users, OTHER, OTHER)
    return users


def test_with_nb_user_a_root_pack_runs_as_that_account_even_into_roots_folder(open_tmp_path):
    """The old rule stayed root for a root-owned DEST; a link to one was enough to keep it."""
    src = _tree(open_tmp_path)
    users = _users_folder(open_tmp_path)
    (users / "dst").symlink_to(open_tmp_path)  # the user's link to a root folder
    os.lchown(users / "dst", OTHER, OTHER)
    done = _diskinfo("pack", str(src), str(users / "dst" / "out"), NB_USER="nobody")
    lines = done.stderr.splitlines()
    assert lines[0].startswith(DROPPED), done
    # nobody's rights: pack names the folder it cannot write and how to get one
    assert done.returncode != 0 and "cannot write DEST's folder" in lines[-1], done
    assert not (open_tmp_path / "out").exists()


def test_with_nb_user_pack_reads_only_what_that_account_may(open_tmp_path):
    src = _tree(open_tmp_path)
    (src / "9.txt").write_text("root only\n")
    (src / "9.txt").chmod(0o600)
    out = open_tmp_path / "nobodys"
    out.mkdir()
    os.chown(out, NOBODY.pw_uid, NOBODY.pw_gid)
    done = _diskinfo("pack", str(src), str(out / "p"), NB_USER="nobody")
    assert done.returncode == 2, done
    assert done.stderr.splitlines()[1:] == [
        f"diskinfo: error: cannot read {src / '9.txt'}: Permission denied"
    ]


def test_resolve_becomes_nb_user_quietly_so_its_json_stays_parseable():
    done = _diskinfo("resolve", "--json", "/", NB_USER="nobody")
    assert done.returncode == 0 and done.stderr == "", done
    assert json.loads(done.stdout)["path"] == "/"


def test_nb_user_naming_no_account_or_root_stops_with_one_line(open_tmp_path):
    for name, words in (("no-such-user", "is no account here"), ("root", "uid 0")):
        done = _diskinfo("resolve", "/", NB_USER=name)
        assert done.returncode == 2 and words in done.stderr, done
        assert len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("how", ["--as-root", "DISKINFO_AS_ROOT=1", "no NB_USER"])
def test_kept_root_refuses_a_users_tree_and_a_link_out_of_it(open_tmp_path, how):
    src = _tree(open_tmp_path)
    users = _users_folder(open_tmp_path)
    (users / "to-root").symlink_to(open_tmp_path)
    flag = ["--as-root"] if how == "--as-root" else []
    env = {"DISKINFO_AS_ROOT": "1"} if how.startswith("DISKINFO") else {}
    if how != "no NB_USER":
        env["NB_USER"] = "nobody"
    for dest in (users / "out", users / "to-root" / "out"):
        done = _diskinfo("pack", *flag, str(src), str(dest), **env)
        assert done.returncode == 2, done
        assert done.stderr.startswith(
            f"diskinfo: error: {dest}: {users} is writable by an account other than root"
        ), done
        assert len(done.stderr.splitlines()) == 1
    assert sorted(os.listdir(open_tmp_path)) == ["src", "users"]


def test_kept_root_works_as_root_in_roots_own_folders(open_tmp_path):
    src = _tree(open_tmp_path)
    done = _diskinfo("pack", "--as-root", str(src), str(open_tmp_path / "out"), NB_USER="nobody")
    assert done.returncode == 0 and "running as" not in done.stderr, done
    assert all(p.stat().st_uid == 0 for p in (open_tmp_path / "out").iterdir())
    # a host without NB_USER: the same, without the option
    done = _diskinfo("pack", str(src), str(open_tmp_path / "out2"))
    assert done.returncode == 0 and "running as" not in done.stderr, done


def test_report_with_nb_user_runs_as_that_account(open_tmp_path):
    logs = open_tmp_path / "logs"
    logs.mkdir()
    (logs / "diskinfo.jsonl").write_text("")
    done = _diskinfo("report", str(logs / "diskinfo.jsonl"), "--no-png", NB_USER="nobody")
    assert done.stderr.startswith(DROPPED), done


def test_tune_runs_the_users_code_only_as_the_user(open_tmp_path):
    """FACTORY is the user's code: with NB_USER (or sudo's user) it is imported after the drop;
    kept root, tune refuses before importing anything."""
    (open_tmp_path / "planted.py").write_text(
        f"open({str(open_tmp_path / 'ran')!r}, 'w').write('imported')\ndef factory(): pass\n"
    )
    args = ("tune", "planted:factory", "--out", str(open_tmp_path / "t"), "--budget", "1")
    cwd = str(open_tmp_path)
    done = _diskinfo(*args, cwd=cwd, NB_USER="nobody")
    assert done.stderr.startswith(DROPPED), done
    done = _diskinfo(*args, cwd=cwd, SUDO_UID=str(NOBODY.pw_uid))
    assert done.stderr.startswith("diskinfo: running as nobody"), done
    assert "the user sudo came from" in done.stderr.splitlines()[0]
    for env in ({"NB_USER": "nobody", "DISKINFO_AS_ROOT": "1"}, {}):
        done = _diskinfo(*args, cwd=cwd, **env)
        assert done.returncode == 2, done
        assert "tune runs your code" in done.stderr and "never does so as root" in done.stderr
    done = _diskinfo(*args, "--as-root", cwd=cwd, NB_USER="nobody")
    assert done.returncode == 2 and "unrecognized arguments: --as-root" in done.stderr, done
    assert not (open_tmp_path / "ran").exists()  # no root run reached the import


def test_tune_in_process_as_root_never_imports_from_a_users_folder(open_tmp_path, monkeypatch):
    from diskinfo.errors import UserError
    from diskinfo.tune.load import load_object

    users = _users_folder(open_tmp_path)
    (users / "planted_factory.py").write_text("raise SystemExit('imported as root')\n")
    monkeypatch.chdir(users)
    with pytest.raises(UserError, match="never runs code from there as root"):
        load_object("planted_factory:make")
    with pytest.raises(UserError, match="never runs code from there as root"):
        load_object(f"{users / 'planted_factory.py'}:make")


def test_the_cold_cache_helper_stays_root_while_the_verb_does_not(open_tmp_path):
    """`tune --cold` as NB_USER: the page cache is dropped by the root helper forked before the
    drop; the verb itself cannot write drop_caches any more."""
    script = (
        "import os\n"
        "from diskinfo.privileges import Account, CacheDropper, become\n"
        "CacheDropper.start()\n"
        f"become(Account('nobody', {NOBODY.pw_uid}, {NOBODY.pw_gid}, '/'))\n"
        "CacheDropper.running.drop()\n"
        "try:\n"
        "    open('/proc/sys/vm/drop_caches', 'w')\n"
        "except PermissionError:\n"
        "    print('verb', os.geteuid(), 'cannot write it itself')\n"
    )
    done = subprocess.run(
        [str(PYTHON), "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=60,
        cwd="/",
    )
    if "Read-only file system" in done.stderr:
        pytest.skip("/proc/sys is read-only here")
    assert done.returncode == 0, done
    assert done.stdout == f"verb {NOBODY.pw_uid} cannot write it itself\n"
