"""The image under Charliecloud, as an ordinary user: `ch-convert -i docker`, then `ch-run` with
the image read-only and no ENTRYPOINT (the semantics of Apptainer and enroot/pyxis too). The
command runs beside the monitor through `diskinfo run`, or through the entrypoint named after
`--`; the verdicts, the JSONL and the [Run] line land in the user's folder, exit codes pass
through. The image is the slim one of tests/helpers/charliecloud.py (no torch): the loop
below reads files, as a data loader does."""

from __future__ import annotations

import json
import os
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
