"""JUPYTER_ARGS -> separate arguments for `jupyter lab`, never through a shell.

Users pass extra Jupyter options in one environment variable; it is split like a shell would
split words (quotes respected) but nothing is expanded or run, and options that would weaken
authentication (token, password, allowed origins, XSRF, another config file) are refused:
they belong to the image's own settings, and a typo there must not leave an open server.
Writes the arguments NUL-separated to the file named on the command line.
"""

from __future__ import annotations

import os
import shlex
import sys

# Option names (lower case, any spelling of the class) that must not come from JUPYTER_ARGS:
# every way to switch authentication, XSRF or origin checks off, or to load other settings.
# tornado_settings carries disable_check_xsrf (and cookie options), so it is refused whole.
FORBIDDEN = (
    "token",
    "password",
    "allow_origin",
    "allow_credentials",
    "xsrf",
    "tornado",
    "cookie",
    "trust_xheaders",
    "identity_provider",
    "authorizer",
    "allow_unauthenticated",
    "authenticate",  # authenticate_prometheus=False: /metrics without the token
    "login_handler",
    "logout_handler",
    "config",
)

# The port is JUPYTER_PORT's alone: what binds must be what is checked, shown and probed.
PORT_OPTIONS = ("port", "port_retries")


def split(text: str) -> list[str]:
    """The arguments in text, or ValueError with a message fit for the user."""
    try:
        args = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"JUPYTER_ARGS cannot be split into arguments: {exc}") from None
    for arg in args:
        if not arg.startswith("-"):
            continue
        name = arg.lstrip("-").split("=", 1)[0].lower().replace("-", "_")
        if name.rsplit(".", 1)[-1] in PORT_OPTIONS:
            raise ValueError(
                f"JUPYTER_ARGS may not set {arg.split('=', 1)[0]}: use -e JUPYTER_PORT=N"
                " (the health check, the banner and the start's port check follow it)"
            )
        for word in FORBIDDEN:
            if word in name:
                raise ValueError(
                    f"JUPYTER_ARGS may not set {arg.split('=', 1)[0]}: authentication, XSRF"
                    " checks, cookies and allowed origins are fixed by the image (use"
                    " JUPYTER_TOKEN or JUPYTER_TOKEN_FILE for the token)"
                )
    return args


def main(argv: list[str]) -> int:
    try:
        args = split(os.environ.get("JUPYTER_ARGS", ""))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    with open(argv[1], "wb") as out:
        out.write(b"".join(arg.encode() + b"\0" for arg in args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
