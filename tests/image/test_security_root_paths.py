"""Root never trusts a path the user controls: its working directory, sys.path and PATH.

The attack itself: jovyan (whoever holds the Jupyter token or an SSH key) writes modules named
like what root imports (secrets, getpass, torch, ...) into /workspace, the working directory
Docker gives the entrypoint, the health check and `docker exec`, and into a folder the
operator put on PYTHONPATH, plus a `python3` into a folder on PATH. Each payload, run as root,
leaves a marker and a setuid copy of bash. After `docker restart`, a few health checks and the
`docker exec` commands the docs give, no marker may exist. Then every root process of the
running container is checked: no working directory, PATH entry or (for a Python without -I)
PYTHONPATH entry that jovyan can write."""

from __future__ import annotations

import json
import shlex

import pytest

pytestmark = pytest.mark.image

# what root imports by name: the standard library's, torch, and the image's own scripts'
# (safe_paths from shared/, jupyter_args and ssh_keys beside settings.py, the banner's scripts)
STDLIB_AND_TORCH = ("secrets", "getpass", "cmd", "torch")
MODULES = (*STDLIB_AND_TORCH, "safe_paths", "jupyter_args", "ssh_keys", "scripts")
# as root: a marker naming the program, and the setuid shell an attacker would keep
PAYLOAD = """\
import os, sys
if os.geteuid() == 0:
    with open("/tmp/pwned-{name}", "a") as marker:
        marker.write(" ".join(sys.argv) + "\\n")
    os.system("cp /bin/bash /tmp/rootbash && chmod 4755 /tmp/rootbash")
# then the real module, so that the program that imported this one runs on unaware
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[__name__]
import importlib
sys.modules[__name__] = importlib.import_module(__name__)
"""
SHIM = """#!/bin/sh
[ "$(id -u)" != 0 ] || echo "$0 $*" >>/tmp/pwned-path-python3
exec /opt/venv/bin/python3 "$@"
"""
PYLIB = "/workspace/pylib"  # on the operator's PYTHONPATH: a folder jovyan writes
USER_BIN = "/workspace/bin"  # on the operator's PATH
# what root's processes are, read by root from /proc: only the container's own processes
# (PID 1 and its descendants), not the `docker exec` that reads them
PROBE = r"""
import json, os

def read(pid, name):
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read().decode(errors="replace")

procs = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        status = dict(x.split(":\t", 1) for x in read(pid, "status").splitlines() if ":\t" in x)
        env = dict(e.split("=", 1) for e in read(pid, "environ").split("\0") if "=" in e)
        procs[int(pid)] = dict(
            ppid=int(status["PPid"]),
            uids=status["Uid"].split()[:2],
            argv=read(pid, "cmdline").split("\0")[:-1],
            exe=os.readlink(f"/proc/{pid}/exe"),
            cwd=os.readlink(f"/proc/{pid}/cwd"),
            path=env.get("PATH", ""),
            pythonpath=env.get("PYTHONPATH", ""),
        )
    except (OSError, KeyError, ValueError):
        pass

def ours(pid):
    while pid > 1:
        pid = procs[pid]["ppid"] if pid in procs else 0
    return pid == 1

print(json.dumps([dict(pid=p, **v) for p, v in procs.items() if "0" in v["uids"] and ours(p)]))
"""
# which of the given paths jovyan could write, or create, or swap (a writable folder above)
WRITABLE = r"""
import json, os, sys
def writable(path):
    path = os.path.abspath(path)
    while True:
        if os.path.lexists(path) and os.access(path, os.W_OK):
            return True
        if path == "/":
            return False
        path = os.path.dirname(path)
print(json.dumps([p for p in json.loads(sys.argv[1]) if writable(p)]))
"""


def plant(running) -> None:
    script = [f"mkdir -p {PYLIB} {USER_BIN}"]
    for folder in ("/workspace", PYLIB):
        for name in MODULES:
            text = PAYLOAD.replace("{name}", f"{name}-{folder.strip('/').replace('/', '-')}")
            script.append(f"printf %s {shlex.quote(text)} >{folder}/{name}.py")
    script.append(f"printf %s {shlex.quote(SHIM)} >{USER_BIN}/python3")
    script.append(f"chmod +x {USER_BIN}/python3")
    code, out = running.exec(" && ".join(script), user="jovyan")
    assert code == 0, out


def markers(running) -> str:
    listing = "ls -l /tmp/rootbash /tmp/pwned-* 2>/dev/null; cat /tmp/pwned-* 2>/dev/null"
    _, out = running.exec(["sh", "-c", listing])
    return out


@pytest.fixture
def attacked(container, docker_client, image, ssh_key, wait_until):
    """A container whose operator put a jovyan folder on PYTHONPATH and PATH (as many do for
    their code), with jovyan's payloads planted and the container restarted."""
    env = docker_client.images.get(image).attrs["Config"]["Env"]
    image_path = dict(e.split("=", 1) for e in env)["PATH"]
    running = container(
        "sleep",
        "600",
        env={
            "JUPYTER_ENABLE": "1",  # 40-jupyter.sh draws a random token with Python
            "PUBLIC_KEY": ssh_key.public,  # sshd: root's program under supervisord
            "PYTHONPATH": PYLIB,
            "PATH": f"{USER_BIN}:{image_path}",
        },
    )
    running.wait_for_program("jupyter", timeout=90)
    plant(running)
    # from here on no root `docker exec` of the test's own: Docker would give it PYTHONPATH
    running.obj.restart(timeout=10)
    wait_until(
        lambda: running.logs().count("Verdicts ") >= 2 and running.health() == "healthy",
        120,
        lambda: f"health {running.health()}: {running.logs()[-3000:]}",
    )
    return running


def test_jovyans_modules_never_run_as_root(attacked):
    # the commands the docs and the banner give, as they give them
    for command in (
        "python3 -c 'import torch, secrets'",
        "diskinfo --version",
        "tail -n 1 /workspace/logs/diskinfo.log",
    ):
        code, out = attacked.exec(command, user="jovyan")
        assert code == 0, f"{command}: {out}"
    # the health check ran as root (Docker runs it in /workspace) several times meanwhile
    assert attacked.health() == "healthy"
    assert markers(attacked) == "", "jovyan's code ran as root:\n" + markers(attacked)
    logs = attacked.logs()
    assert f"PATH entry {USER_BIN} is left out for root's programs" in logs, logs[-3000:]


def test_no_root_process_trusts_a_user_writable_path(attacked):
    code, out = attacked.exec(["/opt/venv/bin/python3", "-I", "-c", PROBE])
    assert code == 0, out
    procs = json.loads(out)
    names = {" ".join(p["argv"]) for p in procs}
    assert any("supervisord-run.py" in n for n in names), names  # PID 1
    assert any("sshd" in n for n in names) and any("train-exit-listener" in n for n in names), names

    def python_path(proc: dict) -> list[str]:
        """PYTHONPATH's entries where this process is a Python that reads it."""
        isolated = any(a in ("-I", "-E") for a in proc["argv"][1:3])
        return [] if isolated or "python" not in proc["exe"] else proc["pythonpath"].split(":")

    claims = {
        (p["pid"], " ".join(p["argv"])[:80], what, path)
        for p in procs
        for what, paths in (
            ("cwd", [p["cwd"]]),
            ("PATH", p["path"].split(":")),
            ("PYTHONPATH", python_path(p)),
        )
        for path in paths
        if path
    }
    code, out = attacked.exec(
        ["/opt/venv/bin/python3", "-I", "-c", WRITABLE, json.dumps(sorted({c[3] for c in claims}))],
        user="jovyan",
    )
    assert code == 0, out
    writable = set(json.loads(out))
    bad = sorted(c for c in claims if c[3] in writable)
    assert not bad, "root processes trusting a path jovyan can write:\n" + "\n".join(map(str, bad))


def test_no_setuid_program_and_the_image_runs_without_new_privileges(
    container, ssh_key, ssh_client, ssh_run, wait_until
):
    """Nothing in the image gains privileges on exec, so Docker's `--security-opt
    no-new-privileges` costs nothing: sshd, Jupyter, the monitor and SSH logins work."""
    running = container(
        "sleep",
        "600",
        env={"JUPYTER_ENABLE": "1", "PUBLIC_KEY": ssh_key.public},
        security_opt=["no-new-privileges"],
    )
    wait_until(lambda: running.health() == "healthy", 120, lambda: running.logs()[-3000:])
    code, out = running.exec("find / -xdev -type f -perm /6000")
    assert (code, out) == (0, ""), out
    assert "NoNewPrivs:\t1" in running.exec("cat /proc/1/status")[1]
    assert ssh_run(ssh_client(running, ssh_key.key), "id -un") == (0, "jovyan\n")
