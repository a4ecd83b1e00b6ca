"""Root's readers of what NB_USER publishes, attacked in the built image.

- The health check (root, every 5 s) reads the monitor's heartbeat in a folder `jovyan` owns:
  a racer swapping a FIFO and a regular file under the name blocks no check and leaves no
  root process behind.
- The metrics port: `jovyan` kills its monitor and binds the port before supervisord starts it
  again; what that fools and what notices it are in docs/security.md ("What the monitor
  publishes"). The test shows both, so the page says what is true.
"""

from __future__ import annotations

import time

HEALTHCHECK = "/usr/local/lib/pytorch-cuda/run/healthcheck.sh"

# jovyan's racer: the heartbeat alternates between a FIFO and a regular file, as fast as rename
# goes, for `seconds`
RACER = r"""
import os, sys, time
d, end = "/run/diskinfo", time.monotonic() + float(sys.argv[1])
beat = b"pid=1\ninterval_s=5\n"
while time.monotonic() < end:
    try:
        os.mkfifo(f"{d}/.f")
        os.rename(f"{d}/.f", f"{d}/heartbeat")
        with open(f"{d}/.r", "wb") as f:
            f.write(beat)
        os.rename(f"{d}/.r", f"{d}/heartbeat")
    except OSError:
        pass
"""

# what a root process blocked on a FIFO looks like: its comm and where it waits
BLOCKED = r"""
import os
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) in (os.getpid(), os.getppid()):
        continue
    try:
        st = os.stat(f"/proc/{pid}")
        comm = open(f"/proc/{pid}/comm").read().strip()
        wchan = open(f"/proc/{pid}/wchan").read().strip()
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError:
        continue
    if st.st_uid == 0 and ("heartbeat-check" in cmd or comm == "head" or "fifo" in wchan):
        print(pid, comm, wchan, cmd)
"""


def test_a_fifo_raced_under_the_heartbeat_blocks_no_root_process(container, wait_until):
    running = container("sleep", "600")
    wait_until(lambda: running.health() == "healthy", 90, lambda: f"health: {running.health()}")
    running.obj.exec_run(["python3", "-c", RACER, "25"], user="jovyan", detach=True)
    time.sleep(1)
    outcomes = []
    start = time.monotonic()
    while time.monotonic() - start < 20:
        code, out = running.exec([HEALTHCHECK], timeout=8)
        outcomes.append((code, out.strip()))
    hung = [o for o in outcomes if o[0] == 124]
    assert not hung, f"{len(hung)} of {len(outcomes)} checks hung: {hung[:3]}"
    assert all(code in (0, 1) for code, _ in outcomes), outcomes
    time.sleep(6)  # the racer's end, and one more of Docker's own checks
    code, out = running.exec(["python3", "-I", "-c", BLOCKED])
    assert code == 0 and out.strip() == "", f"root processes left behind:\n{out}"
    print(f"\n{len(outcomes)} health checks raced, none blocked")


# jovyan's taker: kill the monitor, listen on its port before supervisord starts it again, and
# answer every request with a forged /status
TAKER = r"""
import json, os, signal, socket, subprocess, sys
port = int(sys.argv[1])
found = subprocess.run(["pgrep", "-u", "jovyan", "-f", "diskinfo watch"], capture_output=True,
                       text=True).stdout.split()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
os.kill(int(found[0]), signal.SIGKILL)
for _ in range(10**6):
    try:
        s.bind(("0.0.0.0", port))
        break
    except OSError:
        pass
s.listen(8)
body = json.dumps({"pressure": "saturated", "verdict": "forged \x1b[2J"}).encode()
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    c.close()
"""


def test_a_taken_metrics_port_fools_its_readers_but_not_the_health_check(container, wait_until):
    running = container("sleep", "600")
    wait_until(lambda: running.health() == "healthy", 90, lambda: f"health: {running.health()}")
    port = running.ports["METRICS_PORT"]
    monitor = running.supervisor_pid("diskinfo")
    running.obj.exec_run(["python3", "-c", TAKER, str(port)], user="jovyan", detach=True)

    def forged() -> str | None:
        code, out = running.exec(["diskinfo", "status"], user="jovyan", timeout=10)
        return out if code == 0 and "forged" in out else None

    out = wait_until(forged, 30, "jovyan never took the metrics port")
    assert "\\u001b[2J" in out and "\x1b" not in out  # what it serves is escaped
    wait_until(lambda: running.supervisor_pid("diskinfo") not in (0, monitor), 30, "no restart")

    def unhealthy_check() -> str | None:
        code, out = running.exec([HEALTHCHECK])
        return out if code == 1 and "is held by" in out else None

    out = wait_until(unhealthy_check, 30, "the health check passed with the port taken")
    assert f"the metrics port {port} is held by another process (uid 1000)" in out, out
    assert "not by the diskinfo monitor" in out
    wait_until(lambda: running.health() == "unhealthy", 40, "the container stayed healthy")
