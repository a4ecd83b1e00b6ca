"""Copy stdin to stdout and to a size-rotated log file, like `tee -a` with logrotate built in.

The training command's output must reach both `docker logs` (our stdout, via supervisord) and
/workspace/logs/train.log, rotated like every other log. Bytes are passed through unchanged
and flushed per read, so progress bars and partial lines show up at once.
"""

from __future__ import annotations

import contextlib
import os
import sys

MAX_BYTES = int(os.environ.get("TRAIN_LOG_MAX_BYTES", 50 * 2**20))
BACKUPS = int(os.environ.get("TRAIN_LOG_BACKUPS", 5))


def rotate(path: str, backups: int) -> None:
    """path -> path.1 -> ... -> path.N, the oldest dropped (supervisord's and logging's scheme)."""
    for i in range(backups - 1, 0, -1):
        if os.path.exists(f"{path}.{i}"):
            os.replace(f"{path}.{i}", f"{path}.{i + 1}")
    if backups > 0:
        os.replace(path, f"{path}.1")
    else:
        os.truncate(path, 0)


def tee(src: int, out: int, path: str, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> None:
    log = open(path, "ab", buffering=0)  # noqa: SIM115 - reopened on rotation
    size = log.tell()
    warned = False
    while chunk := os.read(src, 65536):
        with contextlib.suppress(OSError):  # nobody reads stdout: the file copy still matters
            os.write(out, chunk)
        try:
            if max_bytes and size + len(chunk) > max_bytes and size > 0:
                log.close()
                rotate(path, backups)
                log = open(path, "ab", buffering=0)  # noqa: SIM115
                size = 0
            log.write(chunk)
            size += len(chunk)
        except OSError as exc:  # full or read-only disk: keep the program's stdout flowing
            if not warned:
                print(f"log-tee: cannot write {path}: {exc.strerror}", file=sys.stderr)
                warned = True
    log.close()


if __name__ == "__main__":
    tee(sys.stdin.fileno(), sys.stdout.fileno(), sys.argv[1])
