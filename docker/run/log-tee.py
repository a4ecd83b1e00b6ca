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

  log-tee.py [--no-stdout] [--max-bytes SIZE] [--backups N] PATH
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import sys
import time

from diskinfo.errors import UserError
from diskinfo.sinks.rotating import rotate  # the monitor's rotation: one scheme for every log
from diskinfo.units import parse_size

# every log's rotation unless told otherwise (run-train.sh passes TRAIN_LOG_MAX_BYTES and
# TRAIN_LOG_BACKUPS for train.log, the one log the user sizes)
MAX_BYTES, BACKUPS = "50M", "5"
# how long stdout holds back a line's start for its end; the two writes of one print come
# microseconds apart
HOLD_S = 0.1
# a partial line this long goes out as it is, without waiting for its end
HOLD_MAX = 65536


def _open(path: str):
    try:
        return open(path, "ab", buffering=0)
    except OSError as exc:
        print(f"log-tee: cannot write {path}: {exc.strerror}", file=sys.stderr)
        return None


def _send(out: int | None, data: bytes) -> None:
    if out is not None and data:
        with contextlib.suppress(OSError):  # nobody reads stdout: the file copy matters
            os.write(out, data)


def tee(
    src: int, out: int | None, path: str, max_bytes: int = 50 * 2**20, backups: int = 5
) -> None:
    """Copy src to out (None: nowhere) and to path until src ends."""
    log = _open(path)
    size = log.tell() if log else 0
    warned = log is None
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
        if log is None:
            continue
        try:
            if max_bytes and size + len(chunk) > max_bytes and size > 0:
                log.close()
                rotate(path, backups)
                log = _open(path)
                size = 0
                if log is None:
                    warned = True
                    continue
            log.write(chunk)
            size += len(chunk)
        except OSError as exc:  # full or read-only disk: keep the program's stdout flowing
            if not warned:
                print(f"log-tee: cannot write {path}: {exc.strerror}", file=sys.stderr)
                warned = True
    _send(out, pending)
    if log is not None:
        log.close()


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
    tee(sys.stdin.fileno(), out, args.path, max_bytes, backups)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
