"""A new user's first hour, as README.md tells it: the quickstart's commands are taken out of the
README itself and run, and the tests assert on what the user sees (the terminal, which is
`docker logs`; the banner; logs/diskinfo.log; the report's summary and PNG; an SSH login).

The README's text is adapted only by these substitutions, so README and behaviour cannot drift:
- `docker` -> $DOCKER (the client the Makefile passes; `docker` otherwise);
- `pytorch-cuda-diskinfo:latest` -> the image under test ($IMAGE);
- `-p HOST:CONTAINER` flags are dropped for `--network host` with JUPYTER_PORT, SSH_PORT and
  METRICS_PORT set to free ports (our machines allow no bridge network; the container then
  listens on those ports, standing for the host ports a user publishes; a command that
  publishes none gets free ones too, so it cannot collide with the host's own services);
- `--gpus all` is dropped on a host without an NVIDIA GPU (as the README says to do);
- `--name CONTAINER` is added, so the test can reach the container while the command runs.
The shell runs the command as written otherwise: `$PWD` is a fresh project folder holding a
train.py, `$HOME` one holding ~/.ssh/id_ed25519.pub (the user's key).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import ROOT, net, tools, training
from tests.helpers.readme import readme_command

pytestmark = pytest.mark.image

IMAGE = os.environ.get("IMAGE", "pytorch-cuda-diskinfo:test")
DOCKER = os.environ.get("DOCKER", "docker")
README_IMAGE = "pytorch-cuda-diskinfo:latest"
PORT_ENV = {"8888": "JUPYTER_PORT", "22": "SSH_PORT", "9101": "METRICS_PORT"}

# The user's code: the README's two lines around a DataLoader, about 25 s of CPU training, so
# that the monitor (5 s intervals) judges a few intervals of it.
TRAIN_PY = training.train_py(25)


def has_gpu() -> bool:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "GPU " in out.stdout


@dataclass
class Adapted:
    command: str
    name: str
    ports: dict[str, int] = field(default_factory=dict)  # JUPYTER_PORT -> the free port


def adapt(command: str) -> Adapted:
    """The substitutions listed in the module docstring, and nothing else."""
    assert command.startswith("docker run "), command
    name = f"newcomer-{uuid.uuid4().hex[:8]}"
    published = set(re.findall(r"-p \d+:(\d+)", command))
    assert published <= set(PORT_ENV), f"a port the image does not use: {published}"
    ports = {env: net.free_port() for env in PORT_ENV.values()}
    out = re.sub(r" -p \d+:\d+", "", command)
    if not has_gpu():
        out = out.replace(" --gpus all", "")
    env = " ".join(f"-e {k}={v}" for k, v in ports.items())
    out = out.replace("docker run ", f"docker run --name {name} --network host {env} ", 1)
    out = out.replace(README_IMAGE, IMAGE)
    out = DOCKER + out[len("docker") :]
    return Adapted(out, name, ports)


class Session:
    """One command in a shell, its terminal output timestamped line by line as the user sees it."""

    def __init__(self, command: str, cwd: Path, home: Path) -> None:
        env = {**os.environ, "HOME": str(home)}
        self.started = time.monotonic()
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.reader.join(5)

    @property
    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def first(self, pattern: str) -> float | None:
        """Seconds from the command's start to the first line matching pattern."""
        return next((t for t, line in self.lines if re.search(pattern, line)), None)


@pytest.fixture
def project(tmp_path: Path, ssh_key) -> tuple[Path, Path]:
    """A user's project folder with train.py, and a home with their public key."""
    code = tmp_path / "project"
    code.mkdir()
    (code / "train.py").write_text(TRAIN_PY)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(ssh_key.public + "\n")
    return code, home


def _remove(name: str) -> None:
    subprocess.run([DOCKER, "rm", "-f", name], capture_output=True, timeout=60)


def test_the_makefile_has_the_quickstarts_build_targets():
    """`make build` and `make stand-in` as the README writes them (dry run: they take minutes)."""
    for target in ("make build", "make stand-in"):
        readme_command(lambda c, t=target: c == t)
        out = subprocess.run(
            ["make", "-n", target.split()[1], "IMAGE=newcomer-dry-run"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert "build --network host" in out.stdout and "-t newcomer-dry-run" in out.stdout
    stand_in = subprocess.run(
        ["make", "-n", "stand-in"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    pinned = re.search(r"^ARG TORCH_VERSION=(\S+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert pinned and "pip download" in stand_in and f"torch=={pinned.group(1)}" in stand_in
    assert "BASE_IMAGE=local/bookworm:base" in stand_in.replace("--build-arg ", "")


def test_make_stand_in_without_root_says_so_in_one_line():
    tools.find("setpriv")
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "make", "-s", "stand-in"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "needs root and debootstrap" in lines[0], lines


def test_quickstart_train_ssh_banner_verdicts_then_report(project, ssh_key, ssh_client, ssh_run):
    code, home = project
    train = adapt(readme_command(lambda c: "code/train.py" in c))
    session = Session(train.command, code, home)
    try:
        # while training runs: SSH in as the banner says, with the user's key, to their code
        client = net.wait_until(
            lambda: _ssh(ssh_client, train, ssh_key), 90, lambda: f"no SSH:\n{session.text}"
        )
        status, out = ssh_run(client, "cd /workspace/code && ls && whoami")
        assert status == 0 and "train.py" in out and "jovyan" in out, out
        rc = session.wait(timeout=240)
    finally:
        _remove(train.name)
    text = session.text
    assert rc == 0, text[-4000:]
    assert "train.py: " in text and " steps, loss " in text
    # the banner: an openable Jupyter URL with the token, the ssh line, the port caveat once
    jupyter_port = train.ports["JUPYTER_PORT"]
    token = (code / "logs" / "jupyter.log").read_text().split("shown once; set JUPYTER_TOKEN")[1]
    token = token.split(": ", 1)[1].split()[0]
    assert f"Jupyter    http://127.0.0.1:{jupyter_port}/lab?token={token}" in text
    # run here on the host's network (no bridge allowed): the banner knows port and host
    assert f"SSH        ssh -p {train.ports['SSH_PORT']} jovyan@{socket.gethostname()}" in text
    assert text.count("are the host's (this container shares the host's network)") == 1
    assert "CRIT" not in text and "Traceback" not in text, text
    # the monitor: every figure in logs/diskinfo.log, none of them in the terminal
    diskinfo_log = (code / "logs" / "diskinfo.log").read_text()
    assert "[Verdict]" in diskinfo_log and "[DiskIO]" in diskinfo_log
    assert "[DiskIO]" not in text
    # step 4 of the quickstart on this run's logs: the summary and the PNG
    report = adapt(readme_command(lambda c: " report /workspace/logs/" in c))
    session = Session(report.command, code, home)
    try:
        rc = session.wait(timeout=180)
    finally:
        _remove(report.name)
    assert rc == 0, session.text[-3000:]
    summary = session.text
    assert "time share of each verdict:" in summary and "data-wait share:" in summary, summary
    assert "timeline: /workspace/logs/diskinfo.png" in summary
    png = code / "logs" / "diskinfo.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # the verdict reaches the terminal (docker logs), saying where the details are
    assert "[Verdict]" in text and "diskinfo.log" in text.split("[Verdict]", 1)[1], text[-3000:]


def _ssh(ssh_client, running: Adapted, key):
    port = running.ports["SSH_PORT"]
    target = type("Target", (), {"ports": {"SSH_PORT": port}})()
    net.wait_for_port(port, 60)
    return ssh_client(target, key=key.key, retry=False)


def test_demo_shows_verdicts_within_a_minute(tmp_path):
    demo = adapt(readme_command(lambda c: c.endswith(" demo")))
    session = Session(demo.command, tmp_path, tmp_path)
    try:
        rc = session.wait(timeout=240)
    finally:
        _remove(demo.name)
    text = session.text
    assert rc == 0, text[-4000:]
    first = session.first(r"demo: .*\[Verdict\] ")
    assert first is not None and first < 60, text[-4000:]
    phases = re.findall(
        r"demo:   the monitor on '([^']+)': \[Verdict\] ([a-z-]+(?:: [a-z -]+)?):", text
    )
    assert len(phases) == 2, text[-4000:]
    (slow, slow_verdict), (fixed, fixed_verdict) = phases
    assert slow.startswith("a slow input pipeline") and slow_verdict.startswith("input-bound")
    assert fixed.startswith("the fix") and not fixed_verdict.startswith("input-bound"), text
    # phase 2 applies what the monitor advised for phase 1 (it preloaded into RAM while the
    # advice was num_workers 0 -> 2), and the effect is shown
    advice = re.search(r"the monitor on 'a slow[^']*': .* \| try: (num_workers \S+ -> (\d+))", text)
    if advice is not None:
        assert fixed == f"the fix: num_workers={advice.group(2)}, as the monitor advised", text
    else:
        assert "samples decoded once and kept in RAM" in fixed, text
    effect = re.search(r"demo: the fix's effect: ([0-9.]+) -> ([0-9.]+) batches/s \(x", text)
    assert effect is not None and float(effect.group(2)) > float(effect.group(1)), text
    assert "demo: done." in text
    # step 4, verbatim, right after step 3: the demo's run in logs/ is reported
    report = adapt(readme_command(lambda c: " report /workspace/logs/" in c))
    session = Session(report.command, tmp_path, tmp_path)
    try:
        rc = session.wait(timeout=180)
    finally:
        _remove(report.name)
    assert rc == 0, session.text[-3000:]
    assert "time share of each verdict:" in session.text, session.text


def _make_run(tmp_path: Path, tty: bool, *extra: str) -> list[str]:
    """`make run`'s docker arguments, recorded by a stand-in client: the real one would publish
    ports on a bridge network, which our machines forbid."""
    shim = tmp_path / "docker-args"
    shim.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$0.out"\n')
    shim.chmod(0o755)
    argv = ["make", "-s", "run", f"DOCKER={shim}", "IMAGE=img", "CMD=python train.py", *extra]
    if tty:  # a terminal on stdin, as in an interactive shell
        import pty

        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(ROOT)
            os.execvp(argv[0], argv)
        while True:
            try:
                if not os.read(fd, 1024):
                    break
            except OSError:
                break
        os.waitpid(pid, 0)
    else:
        out = subprocess.run(
            argv, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
    return Path(f"{shim}.out").read_text().splitlines()


def test_make_run_works_without_a_tty_and_publishes_every_port(tmp_path):
    args = _make_run(tmp_path, tty=False)
    assert "-it" not in args and args[-3:] == ["img", "python", "train.py"]
    published = {args[i + 1].split(":")[1] for i, a in enumerate(args) if a == "-p"}
    assert published == {"8888", "22", "9101"}
    assert "-it" in _make_run(tmp_path, tty=True)


def test_make_run_mounts_the_project_as_the_readme_s_docker_run_does(tmp_path):
    """README's "the same from make" row ran `python train.py` in /workspace with nothing of
    the user's mounted: "can't open file '/workspace/train.py'". CODE (default: the folder
    make runs in) is /workspace/code, and its logs/ the logs, as step 2's docker run."""

    def mounts(args: list[str]) -> dict[str, str]:
        pairs = [args[i + 1].rsplit(":", 1) for i, a in enumerate(args) if a == "-v"]
        return {inside: outside for outside, inside in pairs}

    project = tmp_path / "my project"
    project.mkdir()
    by_default = mounts(_make_run(tmp_path, False))
    assert by_default["/workspace/code"] == str(ROOT), by_default
    assert by_default["/workspace/logs"] == f"{ROOT}/logs"
    given = mounts(_make_run(tmp_path, False, f"CODE={project}"))
    assert given["/workspace/code"] == str(project) and (project / "logs").is_dir(), given
    assert given["/workspace/logs"] == f"{project}/logs"
    readme = (ROOT / "README.md").read_text().splitlines()
    row = next(line for line in readme if "make run CODE=" in line)
    assert 'CMD="python code/train.py"' in row, row  # the command finds the code where it is
