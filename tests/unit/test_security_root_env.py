"""Root never trusts a path the user controls: every Python the start-up, supervisord and the
health check start is `python3 -I` (no working or script directory, no PYTHON* variables on
sys.path), root's programs work in /, root's PATH keeps only directories root alone can write,
and every `docker exec` the docs and the banner give runs as the unprivileged user."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.helpers.scripts import load

ROOT = Path(__file__).resolve().parents[2]
# what root runs at start and afterwards (supervisord.conf for its programs, Docker's health check)
ROOT_RUN = [
    ROOT / "entrypoint.sh",
    *sorted((ROOT / "docker/start/init.d").glob("*.sh")),
    ROOT / "docker/etc/supervisord.conf",
    ROOT / "docker/run/healthcheck.sh",
    ROOT / "docker/run/logged.sh",
    ROOT / "docker/run/start-sshd.sh",
]
PYTHON_RUN = re.compile(r"(?<![\w./-])python3?(?=\s)(?!\s+-I\b)")
NOT_CODE = re.compile(r"^\s*[#;]")


@pytest.mark.parametrize("path", ROOT_RUN, ids=lambda p: p.name)
def test_every_python_root_starts_is_isolated(path):
    offending = [
        f"{path.name}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if not NOT_CODE.match(line) and PYTHON_RUN.search(line.split(" #")[0])
    ]
    assert not offending, "python3 without -I would put a user-writable path on sys.path"


def test_the_entrypoint_leaves_the_workdir_before_any_step():
    text = (ROOT / "entrypoint.sh").read_text()
    assert re.search(r"^cd /$", text, re.M), (
        "entrypoint.sh must cd / (Docker starts it in /workspace)"
    )
    assert text.index("\ncd /\n") < text.index('. "$step"')
    health = (ROOT / "docker/run/healthcheck.sh").read_text()
    assert re.search(r"^cd / ", health, re.M), "Docker runs the health check in /workspace"


def test_supervisords_root_programs_work_in_root():
    conf = configparser.RawConfigParser()
    conf.read_string((ROOT / "docker/etc/supervisord.conf").read_text().replace("%(", "%%("))
    for section in conf.sections():
        if section.startswith(("program:", "eventlistener:")) and not conf.has_option(
            section, "user"
        ):
            assert conf.get(section, "directory", fallback="") == "/", section


def root_path(path_value: str) -> tuple[str, str]:
    script = ROOT / "docker/shared/root-env.sh"
    done = subprocess.run(
        ["bash", "-c", f'. "{script}" && root_path "$1"', "root_path", path_value],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip(), done.stderr.strip()


@pytest.fixture
def root_tree():
    """A directory only root can write, all the way up (pytest's tmp_path is under /tmp)."""
    if os.geteuid() != 0:
        pytest.skip("a root-owned test tree needs root")
    path = Path(tempfile.mkdtemp(dir=Path.home()))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_roots_path_keeps_only_directories_root_alone_can_write(root_tree):
    user_dir, root_dir, linked, group_w = (root_tree / n for n in ("user", "root", "link", "g"))
    for made in (user_dir, root_dir, group_w):
        made.mkdir()
        made.chmod(0o755)
    os.chown(user_dir, 1000, 100)
    group_w.chmod(0o775)
    linked.symlink_to(user_dir)
    given = f"{user_dir}:{root_dir}::relative:{linked}:{group_w}:/nonexistent:{root_dir}"
    kept, dropped = root_path(given)
    assert kept == str(root_dir)
    assert dropped.splitlines() == [str(user_dir), str(linked), str(group_w)]
    (root_tree / "link2").symlink_to(root_dir)  # a root link to a root directory is root's
    assert root_path(f"{root_tree}/link2")[0] == f"{root_tree}/link2"


def test_a_world_writable_parent_is_not_trusted(tmp_path):
    kept, _ = root_path(f"/tmp:/usr/bin:{tmp_path}")
    assert kept == "/usr/bin"


# `docker exec` as written in the docs and the banner: what an operator copies and runs
# (security.md is left out: it describes what root runs in the attacks its tests make)
DOCS = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "security.md"),
]
# a command, not the name in prose ("`docker exec` commands run as root unless ...")
EXEC = re.compile(r"docker exec [^`\n]+")
AS_USER = re.compile(r"^docker exec (-\w+ )*(-u|--user)[ =]\S+")


def documented_execs() -> list[str]:
    found = [f"{p.name}: {m.group(0)}" for p in DOCS for m in EXEC.finditer(p.read_text())]
    banner = load("start/banner.py")
    facts = banner.Facts(baseline_path="/workspace/logs/baseline.json", bench_path="/workspace")
    found += [f"banner: {m.group(0)}" for m in EXEC.finditer("\n".join(banner.render(facts)))]
    return found


def test_every_documented_docker_exec_runs_as_the_user():
    execs = documented_execs()
    assert any(x.startswith("banner: ") for x in execs), "the banner's bench hint is checked"
    as_root = [x for x in execs if not AS_USER.match(x.split(": ", 1)[1])]
    assert not as_root, "docker exec runs as root without -u"


@pytest.mark.skipif(os.geteuid() != 0, reason="the guard acts for root only")
def test_root_python_imports_nothing_from_a_folder_another_account_writes(open_tmp_path):
    """The image's .pth guard (docker/shared/root_sys_path.py) in a real venv, as the
    Dockerfile installs it: root's `python -c 'import torch'` and `python -m pip` in a folder
    another account writes get the real modules, not the planted ones; that account's Python
    in the same folder still imports its own (the user's cwd is theirs). Only `-c` and `-m`,
    the working directory and PYTHONPATH are used: nothing that needs PYTHONSAFEPATH (3.11+),
    so the mechanism is the one Python 3.10 runs."""
    venv = open_tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python3")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "pytorch_cuda_root_sys_path.py").symlink_to(
        ROOT / "docker/shared/root_sys_path.py"
    )
    (Path(site) / "00-pytorch-cuda-root-sys-path.pth").write_text(
        "import pytorch_cuda_root_sys_path\n"
    )
    users = open_tmp_path / "workspace"
    code = users / "code"
    code.mkdir(parents=True)
    for folder in (users, code):
        (folder / "json.py").write_text("import os\nprint('PLANTED', os.geteuid())\n")
        (folder / "calendar").mkdir()
        (folder / "calendar" / "__init__.py").write_text("print('PLANTED', 'package')\n")
        for path in (folder, *folder.rglob("*")):
            os.lchown(path, 65534, 65534)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(code)}  # an operator's -e PYTHONPATH
    for argv in (["-c", "import json, calendar; print(json.__file__)"], ["-m", "calendar", "2"]):
        done = subprocess.run(
            [python, *argv], cwd=users, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and "PLANTED" not in done.stdout, done
    as_user = subprocess.run(
        [python, "-c", "import json"], cwd=users, env=env, capture_output=True, text=True,
        timeout=60, user=65534, group=65534,
    )  # fmt: skip
    assert as_user.stdout.startswith("PLANTED 65534"), as_user
    # root's own folders stay on sys.path: a root-owned working directory imports as before
    (open_tmp_path / "mine.py").write_text("print('MINE')\n")
    done = subprocess.run(
        [python, "-c", "import mine"], cwd=open_tmp_path, capture_output=True, text=True
    )
    assert done.stdout == "MINE\n", done


RUN_DISKINFO = re.compile(r"docker run [^`\n]*--entrypoint diskinfo")


def test_every_documented_docker_run_of_diskinfo_runs_as_the_caller():
    """`docker run --entrypoint diskinfo` skips the start-up: as root it would become the
    image's uid 1000, not the owner of the mounted folder, so the docs give `-u`."""
    runs = [f"{p.name}: {m.group(0)}" for p in DOCS for m in RUN_DISKINFO.finditer(p.read_text())]
    assert runs, "README step 4 is checked"
    assert all(" -u " in r for r in runs), runs


def test_every_test_security_md_names_exists():
    """docs/security.md lists each guarantee with its test: each named test file, and each
    named test in it, is there."""
    text = (ROOT / "docs/security.md").read_text()
    named = set(re.findall(r"(test_[a-z0-9_]+\.py)(?:::([a-z0-9_]+))?", text))
    assert len(named) > 20, named
    files: dict[str, list[Path]] = {}  # a name may stand in several tiers (unit, image)
    for path in (ROOT / "tests").rglob("test_*.py"):
        files.setdefault(path.name, []).append(path)
    missing = [
        f"{name}::{test}" if test else name
        for name, test in sorted(named)
        if name not in files
        or (test and not any(f"def {test}(" in f.read_text() for f in files[name]))
    ]
    assert not missing, missing
