"""The image under the HPC runtimes that run here, as an ordinary user, image read-only:
Charliecloud (`ch-convert -i docker`, then `ch-run`, no ENTRYPOINT: the semantics of Apptainer
and enroot/pyxis too) and rootless podman. The command runs beside the monitor through
`diskinfo run`, or through the entrypoint named; the verdicts, the JSONL and the [Run] line
land in the user's folder, exit codes pass through. The image is the slim one of
tests/helpers/charliecloud.py (no torch): the loop below reads files, as a data loader does.

podman rootless runs with runc, on the Charliecloud directory (`--rootfs`, the image's ENV from
its ch/environment): crun refuses this kernel's hybrid cgroup mounts ("cgroups in hybrid mode
not supported"), and loading the image into podman's own store would cost another copy."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import charliecloud

pytestmark = [
    pytest.mark.image,
    pytest.mark.skipif(os.geteuid() != 0, reason="makes an ordinary user's folder (root)"),
]

# A loop that reads its data for a few of the monitor's 1 s intervals; exits with argv[1].
LOOP_PY = """\
import os, sys, time
data = [os.path.join(dp, f) for dp, _, fs in os.walk("/usr/lib/python3") for f in fs][:2000]
end = time.monotonic() + 5
steps = 0
while time.monotonic() < end:
    for path in data[:200]:
        with open(path, "rb") as f:
            f.read()
    steps += 1
    time.sleep(0.02)
print(f"loop.py: {steps} steps in {os.getcwd()}", flush=True)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture(scope="session")
def ch_image(image: str) -> Path:
    if not charliecloud.available():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("ch-convert/ch-run missing (CI=true: .ci/run installs charliecloud)")
        pytest.skip("needs Debian's charliecloud-runtime and charliecloud-builders")
    return charliecloud.image_dir(image)


@pytest.fixture(scope="session")
def user() -> Iterator[tuple[int, int, str]]:
    with charliecloud.ordinary_user() as found:
        yield found


@pytest.fixture
def folder(tmp_path: Path, user) -> Path:
    """The user's project: /tmp/... owned by them, with loop.py (a fresh one, outside root's
    0700 pytest folder, so that the user can reach it)."""
    uid, gid, _ = user
    base = Path(subprocess.run(["mktemp", "-d", "/tmp/diskinfo-ch.XXXXXX"], capture_output=True,
                               text=True, check=True).stdout.strip())  # fmt: skip
    (base / "loop.py").write_text(LOOP_PY)
    os.chown(base, uid, gid)
    os.chmod(base, 0o755)
    yield base
    subprocess.run(["rm", "-rf", str(base)])


def ch_run(ch_image: Path, user, folder: Path, *command: str, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`ch-run` as the user, their folder bound at /workspace and the working folder."""
    uid, gid, _ = user
    sets = [f"--set-env={k}={v}" for k, v in {"DISKINFO_INTERVAL": "1", **(env or {})}.items()]
    argv = [
        *charliecloud.as_user(uid, gid), "ch-run", "--set-env", *sets,
        "-b", f"{folder}:/workspace", "-c", "/workspace", str(ch_image), "--", *command,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=folder)


def check_run(out: subprocess.CompletedProcess[str], folder: Path, uid: int, code: int) -> str:
    text = out.stdout + out.stderr
    assert out.returncode == code, text[-3000:]
    # the image is read-only: HOME in it is said once, with the fix; nothing else fails on it
    home = [line for line in text.splitlines() if "cannot be written (Read-only file" in line]
    assert len(home) == 1 and "ch-run --home" in home[0], text[-3000:]
    assert "Traceback" not in text and text.count("Read-only file system") == 1, text[-3000:]
    assert "loop.py: " in text and "==== pytorch-cuda-diskinfo" in text, text[-3000:]
    run = [line for line in text.splitlines() if "Z [Run] " in line]
    assert len(run) == 1, text[-3000:]
    if code:
        assert f"the training command failed: exit status {code}" in run[0], run[0]
    logs = folder / "logs"
    assert {"train.log", "diskinfo.log", "diskinfo.jsonl"} <= {p.name for p in logs.iterdir()}
    assert all(p.stat().st_uid == uid for p in logs.iterdir())
    records = [json.loads(line) for line in (logs / "diskinfo.jsonl").read_text().splitlines()]
    assert records and all(r["verdict"] for r in records), records[-1:]
    assert "[Verdict]" in (logs / "diskinfo.log").read_text()
    return text


@pytest.mark.parametrize("code", [0, 4])
def test_diskinfo_run_under_ch_run_as_an_ordinary_user(ch_image, user, folder, code):
    out = ch_run(ch_image, user, folder, "diskinfo", "run", "--", "python3", "loop.py", str(code))
    text = check_run(out, folder, user[0], code)
    assert "loop.py: " in text and "in /workspace" in text


def test_the_entrypoint_named_runs_the_same_way(ch_image, user, folder):
    """Charliecloud (and Apptainer's runscript) with the entrypoint: no longer "must start as
    root"; one line says what is off; then the same run."""
    out = ch_run(ch_image, user, folder, "/usr/local/bin/entrypoint.sh", "python3", "loop.py", "3")
    text = check_run(out, folder, user[0], 3)
    assert text.count("without root: sshd needs root and is not started") == 1, text[-3000:]
    assert "must start as root" not in text


@pytest.fixture(scope="session")
def podman(user) -> str:
    found = shutil.which("podman")
    if found is None or shutil.which("newuidmap") is None or shutil.which("runc") is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("podman/uidmap/runc missing (CI=true: .ci/run installs them)")
        pytest.skip("needs Debian's podman, uidmap and runc")
    name = user[2]
    # rootless podman maps the user's subordinate ids; an account made without them gets some
    if not any(
        line.startswith(f"{name}:") for line in Path("/etc/subuid").read_text().splitlines()
    ):
        subprocess.run(["usermod", "--add-subuids", "300000-365535", "--add-subgids",
                        "300000-365535", name], check=True, capture_output=True)  # fmt: skip
    return found


def test_the_entrypoint_under_rootless_podman(ch_image, user, folder, podman):
    uid, gid, _ = user
    argv = [
        *charliecloud.as_user(uid, gid), "env", f"XDG_RUNTIME_DIR={folder}/.run",
        f"XDG_DATA_HOME={folder}/.data", f"XDG_CONFIG_HOME={folder}/.config",
        podman, "--runtime", "runc", "--cgroup-manager=cgroupfs", "run", "--rm",
        "--network", "host", "--userns=keep-id", "--passwd=false", "--read-only",
        "--env-file", str(ch_image / "ch" / "environment"), "-e", "DISKINFO_INTERVAL=1",
        "-e", "METRICS_PORT=0", "-v", f"{folder}:/workspace", "-w", "/workspace",
        "--rootfs", str(ch_image), "/usr/local/bin/entrypoint.sh", "python3", "loop.py", "2",
    ]  # fmt: skip
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=folder)
    finally:  # rootless podman keeps a pause process holding its user namespace: end ours
        mark = f"XDG_RUNTIME_DIR={folder}/.run".encode()
        for proc in Path("/proc").glob("[0-9]*"):
            with contextlib.suppress(OSError):
                if (proc / "cmdline").read_bytes() == b"podman\0" and mark in (
                    proc / "environ"
                ).read_bytes().split(b"\0"):
                    os.kill(int(proc.name), signal.SIGTERM)
    text = check_run(out, folder, uid, 2)
    assert text.count("without root: sshd needs root and is not started") == 1, text[-3000:]
