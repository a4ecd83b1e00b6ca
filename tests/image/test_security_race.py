"""The racer: for each operation root performs or our docs give (every verb as root without
`-u`, root's Python in the WORKDIR, the monitor's first intervals, the start-up at `docker
restart`), a jovyan process swaps links (to /etc/shadow, /root/.bashrc, the SSH host key,
supervisord's config, /root, /etc), FIFOs and folders under every path the operation touches,
in a tight loop, for a few seconds. Afterwards nothing jovyan cannot write has changed (owner,
mode, type of every root file outside the user's trees, content of the sensitive ones), nothing
root-only is readable by jovyan anywhere it can look, and no root operation blocked (each is
bounded; 124 is `timeout`'s status)."""

from __future__ import annotations

import base64

import pytest

from tests.image.test_security_links import _state

pytestmark = pytest.mark.image

RACE_S = 4
ROOT_TIMEOUT = 60
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"
W = "/workspace/race"

# jovyan: every path given, in turn, becomes a link to a root target, a FIFO, a folder of links
# (the names our writers use), or nothing (for root to create, and the next round to replace).
RACER = r"""
end=$((SECONDS + $1)); shift
targets=(/etc/shadow /root/.bashrc /etc/ssh/ssh_host_ed25519_key
  /run/pytorch-cuda/supervisord.conf /root /etc)
i=0
while [ $SECONDS -lt $end ]; do
  for p in "$@"; do
    i=$((i + 1))
    t=${targets[i % ${#targets[@]}]}
    rm -rf "$p" 2>/dev/null
    case $((i % 4)) in
      0) ln -s "$t" "$p" ;;
      1) mkfifo "$p" ;;
      2) mkdir -p "$p" && for f in diskinfo.jsonl diskinfo.log diskinfo.lock manifest.json \
           diskinfo.png baseline.json; do ln -s "$t" "$p/$f"; done ;;
      *) ;;
    esac 2>/dev/null
  done
done
"""

FACTORY = """import torch
def make():
    return torch.utils.data.TensorDataset(torch.zeros(128, 4))
"""

# (name, what root runs in /workspace, the paths jovyan races while it runs)
OPERATIONS = [
    (
        "pack",
        f"diskinfo pack {W}/src {W}/dst --force",
        [f"{W}/dst", f"{W}/dst/manifest.json", f"{W}/dst/shard-000000.tar", f"{W}/src/a/1.txt"],
    ),
    (
        "bench",
        f"diskinfo bench {W}/b --size 2M --seconds 0.1 --baseline {W}/bl/baseline.json",
        [f"{W}/b", f"{W}/bl", f"{W}/bl/baseline.json"],
    ),
    (
        "report",
        f"diskinfo report {W}/logs/diskinfo.jsonl --png {W}/png/diskinfo.png",
        [f"{W}/logs/diskinfo.jsonl", f"{W}/png", f"{W}/png/diskinfo.png"],
    ),
    (
        "tune",
        f"cd {W} && diskinfo tune racemod:make --budget 2 --out {W}/tune/t",
        [f"{W}/tune", f"{W}/tune/t.json", f"{W}/tune/t.png", f"{W}/racemod.py"],
    ),
    (
        "watch",
        f"diskinfo watch /workspace --log-dir {W}/wlogs --count 3 --interval 0.3 --metrics-port 0",
        [f"{W}/wlogs", f"{W}/wlogs/diskinfo.jsonl", f"{W}/wlogs/diskinfo.log"],
    ),
    ("resolve", f"diskinfo resolve {W}/r {W}/r/x", [f"{W}/r", f"{W}/r/x"]),
    ("status", "diskinfo status --timeout 2 || true", [f"{W}/status"]),
    (
        "python",
        f"cd {W} && python3 -c 'import json, csv' && python3 -m pip --version",
        [f"{W}/json.py", f"{W}/csv", f"{W}/pip", f"{W}/__pycache__"],
    ),
]


def _secrets(running) -> list[str]:
    """Lines only root can read: the shadow entry, the host key, supervisord's password."""
    lines = []
    for cmd in (
        "head -n1 /etc/shadow",
        f"sed -n 2p {HOST_KEY}",
        "grep -m1 '^password' /run/pytorch-cuda/supervisord.conf",
    ):
        _, out = running.exec(cmd)
        lines.append(out.strip())
    assert all(lines), lines
    return lines


def _readable_by_jovyan(running, secrets: list[str]) -> str:
    """Files jovyan can read, anywhere it can write or look, holding a root-only line."""
    encoded = " ".join(base64.b64encode(line.encode()).decode() for line in secrets)
    script = (
        f"p=$(mktemp -p /dev/shm); for s in {encoded}; do echo $s | base64 -d; echo; done >$p;"
        " grep -rlsF -f $p /workspace /tmp /var/tmp /home /run/diskinfo; rm -f $p"
    )
    _, out = running.exec(script, user="jovyan", timeout=120)
    return out.strip()


def _race(running, seconds: int, paths: list[str]) -> None:
    running.obj.exec_run(
        ["timeout", str(seconds + 5), "bash", "-c", RACER, "racer", str(seconds), *paths],
        user="jovyan",
        detach=True,
    )


@pytest.fixture(scope="module")
def running(module_container, ssh_key):
    running = module_container(env={"PUBLIC_KEY": ssh_key.public, "DISKINFO_INTERVAL": "1"})
    running.wait_for_program("sshd", timeout=90)
    data = base64.b64encode(FACTORY.encode()).decode()
    code, out = running.exec(
        f"mkdir -p {W}/src/a {W}/logs && for i in $(seq 20); do echo $i >{W}/src/a/$i.txt; done"
        f" && echo {data} | base64 -d >{W}/racemod.py"
        " && until [ -s /workspace/logs/diskinfo.jsonl ]; do sleep 0.5; done"
        f" && cp /workspace/logs/diskinfo.jsonl {W}/logs/",
        user="jovyan",
        timeout=60,
    )
    assert code == 0, out
    return running


def test_nothing_root_does_can_be_raced(running):
    before = _state(running)
    secrets = _secrets(running)
    blocked = []
    for name, command, paths in OPERATIONS:
        _race(running, RACE_S, paths)
        code, out = running.exec(command, timeout=ROOT_TIMEOUT)
        if code == 124:
            blocked.append(f"{name}: {out[-500:]}")
        if command.split("&& ")[-1].startswith("diskinfo") and name not in ("resolve", "status"):
            assert "diskinfo: running as jovyan (uid 1000)" in out, f"{name}: {out}"
        running.exec("pkill -u jovyan -f 'racer' || true")
    # the monitor's first intervals, its log files raced (it runs as jovyan: nothing to win)
    logs = [f"/workspace/logs/{n}" for n in ("diskinfo.jsonl", "diskinfo.log", "diskinfo.lock")]
    _race(running, RACE_S, logs)
    running.exec("supervisorctl -c /etc/pytorch-cuda/supervisord.conf restart diskinfo")
    running.exec(f"sleep {RACE_S}; pkill -u jovyan -f racer || true", timeout=RACE_S + 10)
    assert not blocked, blocked
    code, lingering = running.exec(
        "pgrep -a -u 0 -f '^/opt/venv/bin/python[0-9.]* /opt/venv/bin/diskinfo '"
    )
    assert code == 1, lingering  # no root verb left running
    after = _state(running)
    assert after == before, "\n".join(sorted(set(after.splitlines()) ^ set(before.splitlines())))
    assert _readable_by_jovyan(running, secrets) == ""
    assert running.exec("ls /root | grep -v '^\\.' | grep . && exit 1 || exit 0")[0] == 0


def test_a_restart_raced_from_a_second_container_changes_nothing_of_roots(
    container, ssh_key, tmp_path, image
):
    """`docker restart` ends every process of jovyan's in the container, so jovyan races from
    a second container with the same /workspace (uid 1000 on the same files) while the
    start-up prepares the logs, hands the home over and runs the hooks."""
    (tmp_path / "ws").mkdir()
    volumes = {str(tmp_path / "ws"): {"bind": "/workspace", "mode": "rw"}}
    running = container(env={"PUBLIC_KEY": ssh_key.public}, volumes=volumes)
    running.wait_for_program("sshd", timeout=90)
    before = _state(running)
    secrets = _secrets(running)
    paths = [
        "/workspace/logs",
        *(f"/workspace/logs/{n}" for n in ("startup.log", "supervisord.log", "sshd.log")),
        "/workspace/logs/diskinfo.jsonl",
        "/workspace/.startup.d",
    ]
    seconds = 20
    container(
        "-c",
        RACER,
        "racer",
        str(seconds),
        *paths,
        entrypoint="bash",
        user="1000:100",
        volumes=volumes,
    )
    running.obj.restart(timeout=10)
    running.wait_for_program("diskinfo", timeout=90)  # started: no step blocked on a FIFO
    after = _state(running)
    assert after == before, "\n".join(sorted(set(after.splitlines()) ^ set(before.splitlines())))
    assert _readable_by_jovyan(running, secrets[:2]) == ""  # the restart made a new password
