"""Copy stdin to stdout and to a size-rotated log file, like `tee -a` with logrotate built in.

The training command's output must reach both `docker logs` (our stdout, via supervisord) and
/workspace/logs/train.log, rotated like every other log. Bytes are passed through unchanged.
The file gets each read at once. Stdout gets whole lines (a \r starts one): it is shared
with supervisord's own log lines, and a program that writes a line's text and its newline
separately (print under PYTHONUNBUFFERED=1, which the image sets) had supervisord's
"INFO success: ..." land in the middle of it. A partial line waits for its end at most
HOLD_S from its first byte, so progress bars, prompts and rows of dots still show at once.

It is also the only writer of every other log in /workspace/logs (sshd's, Jupyter's, the
monitor's, supervisord's and the start-up's; see logged.sh): it always runs as NB_USER, so a
symbolic link NB_USER planted there can never make root write through it. It ignores SIGINT,
SIGTERM and SIGHUP (a Ctrl-C or a stop must not lose the program's last words) and ends when
its input does.

Whatever happens to the file (a full or read-only disk, a logs folder made unwritable, a
rotation that fails half-way), the output keeps going to stdout: the file copy is given up
with one loud line, tried again every RETRY_S (a recovery is one line too), and the program
on the other end of the pipe never sees an error. An unexpected fault in the tee itself falls
back to a plain copy to stdout, also said once.

  log-tee.py [--no-stdout] [--max-bytes SIZE] [--backups N] PATH
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import select
import signal
import sys
import time

from diskinfo.errors import UserError
from diskinfo.rotating_file import rotate  # the monitor's rotation: one scheme for every log
from diskinfo.units import parse_size

# every log's rotation unless told otherwise (run-train.sh passes TRAIN_LOG_MAX_BYTES and
# TRAIN_LOG_BACKUPS for train.log, the one log the user sizes)
MAX_BYTES, BACKUPS = "50M", "5"
# how long stdout holds back a line's start for its end; the two writes of one print come
# microseconds apart
HOLD_S = 0.1
# a partial line this long goes out as it is, without waiting for its end
HOLD_MAX = 65536
# seconds between tries to write the file again after a failure
RETRY_S = 30.0


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"log-tee: {text}", file=sys.stderr, flush=True)


class LogFile:
    """The rotated file copy. `write` never raises: a failure (OSError, or ValueError from a
    file a failed rotation left closed) drops the file, says so once, and a later write tries
    again after RETRY_S."""

    def __init__(self, path: str, max_bytes: int, backups: int) -> None:
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self.file: io.FileIO | None = None
        self.size = 0
        self.failed_at: float | None = None
        self.dropped = 0
        self._open()

    def _open(self) -> bool:
        try:
            self.file = io.FileIO(self.path, "a")
            self.size = self.file.seek(0, os.SEEK_END)
        except (OSError, ValueError) as exc:
            self._fail(exc)
            return False
        return True

    def _fail(self, exc: Exception) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError, ValueError):
                self.file.close()
            self.file = None
        if self.failed_at is None:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            _say(
                f"ERROR: cannot write {self.path}: {reason}; the output goes on to docker logs "
                f"only (tried again every {RETRY_S:g} s)"
            )
        self.failed_at = time.monotonic()

    def write(self, chunk: bytes) -> None:
        if self.file is None:
            if self.failed_at is not None and time.monotonic() - self.failed_at < RETRY_S:
                self.dropped += len(chunk)
                return
            if not self._open():
                self.dropped += len(chunk)
                return
        try:
            if self.max_bytes and self.size + len(chunk) > self.max_bytes and self.size > 0:
                assert self.file is not None
                self.file.close()
                self.file = None
                rotate(self.path, self.backups)
                if not self._open():
                    self.dropped += len(chunk)
                    return
            assert self.file is not None
            written = 0
            while written < len(chunk):
                written += self.file.write(chunk[written:]) or 0
            self.size += len(chunk)
        except (OSError, ValueError) as exc:  # full or read-only disk, a folder made 0555
            self._fail(exc)
            self.dropped += len(chunk)
            return
        if self.failed_at is not None:  # said once, like the failure
            _say(f"writing {self.path} again ({self.dropped} bytes went to docker logs only)")
            self.failed_at, self.dropped = None, 0

    def close(self) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError, ValueError):
                self.file.close()


def _send(out: int | None, data: bytes) -> None:
    if out is not None and data:
        with contextlib.suppress(OSError):  # nobody reads stdout: the file copy matters
            os.write(out, data)


def tee(
    src: int, out: int | None, path: str, max_bytes: int = 50 * 2**20, backups: int = 5
) -> None:
    """Copy src to out (None: nowhere) and to path until src ends."""
    log = LogFile(path, max_bytes, backups)
    try:
        _copy(src, out, log)
    finally:
        log.close()


def _copy(src: int, out: int | None, log: LogFile) -> None:
    pending, due = b"", 0.0  # stdout's partial line, and when it goes out as it is
    while True:
        if pending:
            wait = due - time.monotonic()
            if wait <= 0 or not select.select([src], [], [], wait)[0]:
                _send(out, pending)  # a progress bar, a prompt, dots: show them now
                pending = b""
        chunk = os.read(src, 65536)
        if not chunk:
            break
        data = pending + chunk
        # up to the last line's end; a \r starts a line that is redrawn (a progress bar)
        cut = max(data.rfind(b"\n") + 1, data.rfind(b"\r"), 0)
        if len(data) - cut >= HOLD_MAX:
            cut = len(data)
        _send(out, data[:cut])
        if cut or not pending:  # a new partial line: its own HOLD_S from now
            due = time.monotonic() + HOLD_S
        pending = data[cut:] if out is not None else b""
        log.write(chunk)
    _send(out, pending)


def plain_copy(src: int, out: int | None) -> None:
    """The last resort: stdin to stdout as it comes, so the program is never cut off."""
    while chunk := os.read(src, 65536):
        _send(out, chunk)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="log-tee.py")
    parser.add_argument("path")
    parser.add_argument("--no-stdout", action="store_true", help="only the file")
    parser.add_argument("--max-bytes", default=MAX_BYTES, help="rotate above this size (50M)")
    parser.add_argument("--backups", default=BACKUPS, help="rotated copies kept (5)")
    args = parser.parse_args(argv)
    try:
        max_bytes, backups = parse_size(args.max_bytes, minimum=0), int(args.backups)
    except (UserError, ValueError):
        print(f"log-tee: bad size {args.max_bytes!r} or count {args.backups!r}", file=sys.stderr)
        # still copy: the program's output matters most
        max_bytes, backups = parse_size(MAX_BYTES), int(BACKUPS)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    out = None if args.no_stdout else sys.stdout.fileno()
    try:
        tee(sys.stdin.fileno(), out, args.path, max_bytes, backups)
    except Exception as exc:  # a bug of ours must not cut the program's output off
        _say(
            f"ERROR: {type(exc).__name__}: {exc}; {args.path} is no longer written, the output "
            "goes on to docker logs only"
        )
        plain_copy(sys.stdin.fileno(), out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
