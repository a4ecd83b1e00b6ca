"""jovyan (anyone with the Jupyter token or an SSH key) plants links where the root-run
start-up works, then the container restarts: nothing outside /workspace may change owner, mode
or content, and no root process may run jovyan's code. Also: a logs directory from a uid-1000
run works with NB_UID=1234 (the same mounted logs folder across runs with other uids)."""

from __future__ import annotations

import os
import time

import pytest

from tests.helpers import net

pytestmark = pytest.mark.image

# Everything root owns, outside what jovyan may write or what a start rewrites.
SNAPSHOT = (
    r"find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /workspace -o -path /home"
    r" -o -path /run -o -path /tmp -o -path /var/tmp -o -path /opt/user-venv \) -prune"
    r" -o -printf '%p %U %G %m %y\n'"
    " | sort"
)
CONTENT = (
    "sha256sum /etc/shadow /etc/passwd /etc/group /root/.bashrc /etc/ssh/sshd_config"
    " /etc/pytorch-cuda/supervisord.conf.in"
    " && find /usr/local/lib/pytorch-cuda -type f -exec sha256sum {} + | sort"
)
# log file -> what root would have chowned, created or appended to
LINKS = {
    "sshd.log": "/etc/shadow",
    "jupyter.log": "/etc/passwd",
    "supervisord.log": "/usr/local/lib/pytorch-cuda/start/init.d/99-pwn.sh",
    "startup.log": "/root/.bashrc",
    "diskinfo-monitor.log": "/etc/pytorch-cuda/startup.d/10-pwn",
    "train.log": "/etc/ssh/sshd_config",
    "diskinfo.log": "/etc/group",
    "diskinfo.jsonl": "/usr/local/bin/pwn",
    "train.log.1": "/etc/cron.daily/pwn",
}
PAYLOAD = "#!/bin/sh\ntouch /root/pwned\n"
ROOT_PTH = 'import os; os.geteuid() == 0 and open("/root/pwned", "w").close()\\n'
HOOK = "#!/bin/sh\nid -u >/workspace/hook-uid\ntouch /root/pwned 2>/dev/null\nexit 0\n"


def _state(running) -> str:
    _, files = running.exec(SNAPSHOT, timeout=120)
    _, sums = running.exec(CONTENT)
    return files + sums


def _restart(running) -> None:
    running.obj.restart(timeout=10)
    running.wait_for_program("diskinfo", timeout=90)


def _as_jovyan(running, cmd: str) -> str:
    _, out = running.exec(cmd, user="jovyan")
    return out


@pytest.mark.parametrize("workspace", ["in-image", "bind-mounted"])
def test_planted_links_never_reach_root(container, ssh_key, tmp_path, workspace):
    volumes = {}
    if workspace == "bind-mounted":
        (tmp_path / "ws").mkdir()
        volumes = {str(tmp_path / "ws"): {"bind": "/workspace", "mode": "rw"}}
    running = container(env={"PUBLIC_KEY": ssh_key.public}, volumes=volumes)
    running.wait_for_program("sshd", timeout=90)
    before = _state(running)

    plant = ["mkdir -p /workspace/logs /workspace/.startup.d"]
    plant += [f"ln -sfn {target} /workspace/logs/{name}" for name, target in LINKS.items()]
    plant += [
        f"printf '{HOOK}' >/workspace/.startup.d/10-check && chmod +x /workspace/.startup.d/*",
        "ln -sfn /usr/local/lib/pytorch-cuda/start/init.d/40-jupyter.sh"
        " /workspace/.startup.d/20-link",
        "rm -rf ~/.ssh && ln -sfn /etc/ssh ~/.ssh",
        # NB_USER's Python environment: a link for the start-up's chown, code for root's Python
        "ln -sfn /etc/shadow /opt/user-venv/shadow",
        "for d in /opt/user-venv/lib/python3*/site-packages; do"
        f" printf '{ROOT_PTH}' >$d/zz-check.pth; done",
    ]
    _as_jovyan(running, " && ".join(plant))
    _restart(running)
    # had root chowned or created any target, this would now make it jovyan's code
    for target in LINKS.values():
        _as_jovyan(running, f"printf '{PAYLOAD}' >{target}; chmod +x {target}")
    # the logs directory itself -> /etc
    _as_jovyan(
        running,
        "rm -rf /workspace/logs.old; mv /workspace/logs /workspace/logs.old"
        " && ln -s /etc /workspace/logs",
    )
    _restart(running)

    after = _state(running)
    assert after == before, "\n".join(
        sorted(set(after.splitlines()) ^ set(before.splitlines()))[:40]
    )
    for command in ("diskinfo --version", "python -c pass", "pip --version"):  # docker exec
        assert running.exec(command)[0] == 0, command
    assert running.exec("test -e /root/pwned")[0] != 0
    assert running.read_file("/workspace/hook-uid").strip() != "0"
    assert running.exec("test -d /workspace/logs && ! test -L /workspace/logs")[0] == 0
    logs = running.logs()
    assert "/workspace/logs was a symbolic link to /etc: replaced with a directory" in logs
    assert "removed sshd.log: it was a symbolic link to /etc/shadow, not a log file" in logs
    status = running.supervisor_status()
    assert status.get("sshd") == "RUNNING" and status.get("diskinfo") == "RUNNING", status
    # and the logs still work: written by jovyan, through no link
    net.wait_until(
        lambda: "Server listening" in running.exec("cat /workspace/logs/sshd.log")[1],
        30,
        "sshd.log never filled",
    )


def test_logs_from_a_uid_1000_run_are_handed_to_the_new_uid(container, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    volumes = {str(logs): {"bind": "/workspace/logs", "mode": "rw"}}
    first = container(env={"DISKINFO_INTERVAL": "1"}, volumes=volumes)
    net.wait_until(lambda: (logs / "diskinfo.jsonl").exists(), 60, "no diskinfo.jsonl")
    first.obj.remove(force=True)
    assert (logs / "diskinfo.jsonl").stat().st_uid == 1000
    size = (logs / "diskinfo.jsonl").stat().st_size

    second = container(env={"DISKINFO_INTERVAL": "1", "NB_UID": "1234"}, volumes=volumes)
    net.wait_until(
        lambda: (logs / "diskinfo.jsonl").stat().st_size > size + 200,
        60,
        lambda: f"the monitor never wrote as uid 1234:\n{second.logs()[-2000:]}",
    )
    owners = {p.name: p.stat().st_uid for p in logs.iterdir()}
    assert {owners[n] for n in ("diskinfo.jsonl", "diskinfo.log", "startup.log")} == {1234}, owners
    assert "log file(s) of another uid are now uid 1234's" in second.logs()
    time.sleep(0.1)
    assert os.stat(logs).st_uid == 1234
