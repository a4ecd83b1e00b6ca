"""supervisord event listener: when the training command ends, end the container.

supervisord has no notion of a "main" program, so this listener watches `train` and, unless
KEEP_ALIVE=1, asks supervisord (PID 1) to shut down; supervisord-run.py then exits with the
status run-train.sh recorded. Speaks supervisord's listener protocol on stdin/stdout.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import signal
import socket
import sys
from pathlib import Path

if __name__ == "__main__":  # root runs it as `python3 -I`, which leaves the working and the
    # script's own directory off sys.path: what both phases use comes from the root-owned
    # shared/ beside run/, here as in the checkout (docker/shared/)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))
import safe_paths

NO_STATE = "train-exit-listener: STARTUP_STATE_DIR not set: the image sets it (Dockerfile ENV)"


def parse(line: str) -> dict[str, str]:
    """'a:1 b:2' -> {'a': '1', 'b': '2'} (headers and payloads look alike)."""
    return dict(token.split(":", 1) for token in line.split())


def log(msg: str) -> None:
    print(f"train-exit-listener: {msg}", file=sys.stderr, flush=True)


def handle(event: str, payload: dict[str, str], keep_alive: bool, state: Path) -> bool:
    """True when supervisord should shut down now."""
    if payload.get("processname") != "train":
        return False
    if event == "PROCESS_STATE_FATAL":
        # train/ is NB_USER's and we are root: create only, never through a planted link
        with contextlib.suppress(FileExistsError):
            fd = os.open(state / "train" / "exit", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b"127\n")
            os.close(fd)
        log("the training command could not be started (see train.log)")
    try:
        code = safe_paths.read_small(str(state / "train" / "exit"), 64).decode().strip()
    except (OSError, safe_paths.Refused, UnicodeDecodeError):
        code = "unknown"
    if keep_alive:
        log(f"training exited with status {code}; KEEP_ALIVE=1 keeps the services up")
        return False
    log(f"training exited with status {code}; stopping the container")
    return True


def stop_supervisord(config: Path) -> bool:
    """Shut supervisord down through its control socket, as `supervisorctl shutdown` does;
    False when that failed and a SIGTERM to PID 1 had to do it.

    The signal made supervisord open every clean end in docker logs with "WARN received
    SIGTERM indicating exit request"; asked this way it says only "INFO waiting for ... to
    die". The signal stays the fallback: the container must end either way.

    Asked this way, supervisord sends us its SIGTERM while we read its reply, where Python's
    handler did not always run (1 run in 10: the listener back in its read of stdin and
    SIGKILLed after stopwaitsecs). So SIGTERM is ignored from the request on, and the caller
    ends the listener itself once supervisord has the request."""
    handler = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        from supervisor import childutils  # the image's supervisor, which runs us

        socket.setdefaulttimeout(10)  # a socket that never answers: the signal, not a hang
        conf = configparser.RawConfigParser()
        if not conf.read(config):
            raise OSError(f"cannot read {config}")
        rpc = childutils.getRPCInterface(
            {
                "SUPERVISOR_SERVER_URL": os.environ["SUPERVISOR_SERVER_URL"],
                "SUPERVISOR_USERNAME": conf.get("supervisorctl", "username", fallback=""),
                "SUPERVISOR_PASSWORD": conf.get("supervisorctl", "password", fallback=""),
            }
        )
        rpc.supervisor.shutdown()
        return True
    except Exception as exc:  # any failure: the signal still ends the container
        signal.signal(signal.SIGTERM, handler)
        log(f"shutting down through the control socket failed ({exc}); sending SIGTERM")
        os.kill(1 if os.getppid() == 1 else os.getppid(), signal.SIGTERM)
        return False


def main() -> None:
    state = Path(os.environ.get("STARTUP_STATE_DIR") or sys.exit(NO_STATE))
    keep_alive = os.environ.get("KEEP_ALIVE") == "1"  # 01-settings.sh made it 1 or 0
    # supervisord's SIGTERM at the container's end is this listener's normal end: exit 0, so
    # docker logs says "stopped: train-exit (exit status 0)", not a WARN "terminated by SIGTERM"
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    while True:
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        header = parse(sys.stdin.readline())
        payload = parse(sys.stdin.read(int(header["len"])).split("\n", 1)[0])
        stop = handle(header["eventname"], payload, keep_alive, state)
        sys.stdout.write("RESULT 2\nOK")
        sys.stdout.flush()
        # asked through the socket, supervisord is shutting down and starts nothing again
        # supervisord-run.py's running config, root's alone (as we are): the socket's password
        if stop and stop_supervisord(state / "supervisord.conf"):
            return


if __name__ == "__main__":
    main()
