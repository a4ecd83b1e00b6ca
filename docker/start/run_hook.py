"""Run one start-up hook with a hard deadline that covers everything it started.

`timeout HOOK | while read` hangs for ever when the hook leaves a background process (`sleep
600 &`) holding its output open, and stops only the hook, not its children. Here the hook gets
its own session and process group and a pipe of its own; its output lines are printed as they
come, control characters escaped; at the deadline the whole group gets SIGTERM, then SIGKILL,
and we stop reading whatever still holds the pipe. Background processes that closed the
hook's output are left running.

  run_hook.py TIMEOUT RESULT_FILE COMMAND...

RESULT_FILE gets `exit N` (the hook's status) or `timeout` (stopped at the deadline; the hook
itself had ended when only its background processes kept the output open: `timeout N`).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

MAX_LINE = 4096
GRACE = 2.0


def printable(text: str) -> str:
    """A hook's line as docker logs may show it: control and format characters (escape
    sequences, a carriage return that would overwrite the line's prefix, bidi overrides)
    escaped as `\\x1b`, so a hook can colour nothing and forge no other line; tabs stay."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == "\t" else ascii(ch)[1:-1] for ch in text)


def _kill_group(pgid: int) -> None:
    for sig, pause in ((signal.SIGTERM, GRACE), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(pause)


def run(command: list[str], timeout: float, out=sys.stdout) -> str:
    """Run command, copying its output lines to out; 'exit N', 'timeout' or 'timeout N'."""
    deadline = time.monotonic() + timeout
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        out.write(f"cannot run it: {exc.strerror}\n")
        return "exit 126"
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    pending = b""

    def emit(data: bytes) -> None:
        out.write(printable(data.decode(errors="replace").rstrip("\r")[:MAX_LINE]) + "\n")
        out.flush()

    eof = False
    while not eof:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            continue
        chunk = b""
        with contextlib.suppress(BlockingIOError):
            chunk = os.read(fd, 65536)
        if not chunk:
            eof = True
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            emit(line)
        if len(pending) > MAX_LINE:
            emit(pending)
            pending = b""
    if pending:
        emit(pending)
    if eof:
        # output closed: the hook has ended or is about to; it still gets the deadline
        try:
            status = proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            status = None
    else:
        status = proc.poll()
    if eof and status is not None:
        return f"exit {status}"
    _kill_group(proc.pid)
    proc.stdout.close()
    if status is None:
        proc.wait()
        return "timeout"
    return f"timeout {status}"


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: run_hook.py TIMEOUT RESULT_FILE COMMAND...", file=sys.stderr)
        return 2
    result = run(argv[2:], float(argv[0]))
    with open(argv[1], "w") as f:
        f.write(result + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
