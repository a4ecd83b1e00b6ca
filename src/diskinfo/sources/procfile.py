"""A /proc file kept open and re-read from offset 0 on every sample.

Opening a text file costs open, fstat, ioctl, lseek, read and close plus a new TextIOWrapper;
`pread` on a kept descriptor costs one syscall. The monitor reads several /proc files every
interval on a budget of less than a millisecond, so this is where that budget is kept.
/proc's and sysfs's seq_files regenerate their text for each read from 0, and fill the buffer
they are given unless the text ends: a read shorter than asked for is the end.
"""

from __future__ import annotations

import os

CHUNK = 1 << 16


class ProcFile:
    def __init__(self, path: str, encoding: str = "ascii") -> None:
        self.path = path
        self.encoding = encoding
        self._fd: int | None = None

    def read(self) -> str:
        """The whole current text; OSError as `open` would raise it. After an error the
        descriptor is dropped, so the next call opens the file again."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.pread(self._fd, CHUNK, 0)
            if len(data) == CHUNK:  # more than one buffer: read on to the short read
                chunks = [data]
                while len(chunks[-1]) == CHUNK:
                    chunks.append(os.pread(self._fd, CHUNK, CHUNK * len(chunks)))
                data = b"".join(chunks)
        except OSError:
            self.close()
            raise
        return data.decode(self.encoding, "replace")

    def __call__(self) -> str:
        return self.read()

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __del__(self) -> None:
        self.close()
