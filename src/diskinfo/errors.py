"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class UserError(Exception):
    """Bad input or an unmet precondition the user can fix; never shown as a traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP raised as an interrupt, so that what Ctrl-C cleans up is cleaned up
    on `docker stop`, `timeout` or a closed terminal too (a bench's test file, a half shard);
    by default Python dies at once on those and runs no `finally`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.exit_code = 128 + signum


def interrupted_exit(exc: KeyboardInterrupt) -> int:
    """The shell's exit status for a run ended by this interrupt: 130 for Ctrl-C, 128+N for
    signal N."""
    return exc.exit_code if isinstance(exc, Terminated) else 130


def printable(text: str) -> str:
    """`text` with every character a terminal would act on or cannot show (ESC, CR, newline,
    a file name's undecodable bytes) written as its Python escape: a file name is data, and
    must not move root's cursor or recolour its screen when an error quotes it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
