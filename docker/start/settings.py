"""Every `docker run -e` setting, checked once at start before anything else happens.

A bad value must stop the container at once with one line naming the variable and what it
accepts, rather than half-start it (a monitor in BACKOFF for ever, a training command killed
by a ValueError, a uid that string comparison took for non-root). Numbers are read as numbers
(`NB_UID=00` is 0, `0x0` and `1e3` are not whole numbers), sizes by diskinfo.units' one rule.

Prints the settings that are set, in canonical form, as NUL-terminated NAME=VALUE records for
the entrypoint to export; DISKINFO_PATHS' entries go NUL-separated to the file named by
--paths-file. Exit 2 with the one line on stderr for the first bad setting.
"""

from __future__ import annotations

import argparse
import grp
import ipaddress
import os
import pwd
import re
import sys
from collections.abc import Callable, Mapping

from diskinfo.errors import UserError
from diskinfo.units import RULE, parse_size

if __name__ == "__main__":  # root runs it as `python3 -I`, which leaves the working and the
    # script's own directory off sys.path: siblings come from this root-owned one, by name
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import jupyter_args
import ssh_keys

UID_MAX = 2**31 - 1
MANAGED_USER_FILE = "/var/lib/pytorch-cuda/nb-user"
IMAGE_UID = 1000  # the Dockerfile's NB_UID: the account start-up renames and renumbers
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
# Groups that can read or change part of the system (in the image: shadow reads /etc/shadow,
# adm and utmp the system's logs, _ssh runs ssh-agent setgid, staff writes /var/local, mail
# /var/mail; the others by their Debian and Ubuntu meaning). As NB_USER's primary group, every
# service, terminal and training command would hold it. Other groups (dialout, gid 20, is a
# Mac's `id -g`) grant nothing here and stay accepted.
PRIVILEGED_GROUPS = frozenset(
    {"root", "adm", "disk", "kmem", "mail", "shadow", "staff", "sudo", "wheel", "tty", "utmp",
     "_ssh", "ssh", "crontab", "systemd-journal", "docker", "lxd", "sys", "operator"}
)  # fmt: skip
PATHS_HELP = (
    "absolute paths separated by ':' (e.g. /workspace/data:/workspace/my data); a value"
    " without ':' whose space-separated words all start with '/' is read as that list"
)


class Bad(Exception):
    """One line for the user: which variable, what it got, what it accepts."""


def whole(name: str, value: str, low: int, high: int, what: str = "") -> str:
    if not re.fullmatch(r"[0-9]+", value) or not low <= int(value) <= high:
        accepts = what or f"a whole number from {low} to {high}"
        raise Bad(f"{name} must be {accepts} (decimal digits only), got {value!r}")
    return str(int(value))


def seconds(name: str, value: str) -> str:
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?|\.[0-9]+", value) or not 0 < float(value) <= 86400:
        raise Bad(f"{name} must be a number of seconds above 0, such as 5 or 0.5, got {value!r}")
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def boolean(name: str, value: str) -> str:
    if value.strip().lower() in TRUE:
        return "1"
    if value.strip().lower() in FALSE:
        return "0"
    raise Bad(f"{name} must be 1 or 0 (also true/false, yes/no, on/off), got {value!r}")


def size(name: str, value: str) -> str:
    try:
        number = parse_size(value, minimum=0)
    except UserError:
        accepts = "a size such as 50M or 52428800"
        raise Bad(f"{name} must be {accepts} ({RULE}), got {value!r}") from None
    return str(number)


def absolute(name: str, value: str) -> str:
    if not value.startswith("/") or "\0" in value or "\n" in value:
        raise Bad(f"{name} must be an absolute path (starting with /), got {value!r}")
    return os.path.normpath(value)


def address(name: str, value: str) -> str:
    if value == "localhost":
        return value
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        accepts = "an IP address such as 0.0.0.0 or 127.0.0.1"
        raise Bad(f"{name} must be {accepts}, got {value!r}") from None


def path_list(value: str) -> list[str]:
    """DISKINFO_PATHS' entries: ':'-separated; the old space-separated form when unambiguous."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        # a newline is not a separator: every log and the monitor's list are line-based
        raise Bad(f"DISKINFO_PATHS holds a control character (a newline?), got {value!r}")
    words = value.split()
    if ":" not in value and len(words) > 1 and all(w.startswith("/") for w in words):
        parts = words
    else:
        parts = [part for part in value.split(":") if part.strip()]
    if not parts:
        raise Bad(f"DISKINFO_PATHS must list at least one path: {PATHS_HELP}")
    for part in parts:
        if not part.startswith("/"):
            raise Bad(f"DISKINFO_PATHS entry {part!r} is not absolute: {PATHS_HELP}")
    return [os.path.normpath(part) for part in parts]


def managed_user(record: str = MANAGED_USER_FILE) -> str | None:
    """The name of the image's own account (the one start-up renames), if known."""
    try:
        with open(record) as f:
            return f.read().strip() or None
    except OSError:
        pass
    try:
        return pwd.getpwuid(IMAGE_UID).pw_name
    except KeyError:
        return None


def user_name(
    value: str,
    lookup: Callable[[str], pwd.struct_passwd] = pwd.getpwnam,
    managed: Callable[[], str | None] = managed_user,
) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
        raise Bad(
            f"NB_USER must be a plain user name (lower case letters, digits, _ and -, at most"
            f" 32, not starting with a digit), got {value!r}"
        )
    try:
        existing = lookup(value)
    except KeyError:
        return value
    if value != managed():
        raise Bad(
            f"NB_USER={value} names an existing system account (uid {existing.pw_uid}); pick a"
            " new name for the image's user, or leave NB_USER unset (jovyan)"
        )
    return value


def uid(value: str) -> str:
    canonical = whole("NB_UID", value, 0, UID_MAX)
    if canonical == "0":
        raise Bad(
            f"NB_UID={value} is root (uid 0), which is refused: every service, Jupyter's"
            " terminals and the training command would run as root. Leave NB_UID unset (1000)"
            " or pass your own non-root uid, e.g. -e NB_UID=$(id -u) from a normal account;"
            " as root on the host, -e CHOWN_EXTRA=/workspace/code hands the project folder you"
            " mounted there to NB_USER, so it can save into it"
        )
    return canonical


def gid(value: str, lookup: Callable[[int], grp.struct_group] = grp.getgrgid) -> str:
    canonical = whole("NB_GID", value, 0, UID_MAX)
    try:
        name = "root" if canonical == "0" else lookup(int(canonical)).gr_name
    except KeyError:
        return canonical
    if name in PRIVILEGED_GROUPS:
        raise Bad(
            f"NB_GID={value} is the group {name}, which can read or change part of the system;"
            " every service would hold it. Leave NB_GID unset (100, users) or pass your own"
            " group, e.g. -e NB_GID=$(id -g)"
        )
    return canonical


def token(value: str) -> str:
    if not value:
        raise Bad(
            "JUPYTER_TOKEN is empty: Jupyter never runs without a token (unset it for a random"
            " one, or set JUPYTER_ENABLE=0)"
        )
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise Bad("JUPYTER_TOKEN must be printable characters without spaces")
    return value


def public_key(value: str) -> str:
    _, bad = ssh_keys.key_lines(value)
    if bad:
        number, why = bad[0]
        raise Bad(f"PUBLIC_KEY line {number} is not an SSH public key: {why} ({ssh_keys.EXPECTED})")
    return value


def jupyter_arguments(value: str) -> str:
    try:
        jupyter_args.split(value)
    except ValueError as exc:
        raise Bad(str(exc)) from None
    return value


def port(name: str, low: int = 1) -> Callable[[str], str]:
    what = "a port from 1 to 65535" if low else "a port from 1 to 65535, or 0 for off"
    return lambda value: whole(name, value, low, 65535, what)


CHECKS: dict[str, Callable[[str], str]] = {
    "NB_USER": user_name,
    "NB_UID": uid,
    "NB_GID": gid,
    "JUPYTER_PORT": port("JUPYTER_PORT"),
    "SSH_PORT": port("SSH_PORT"),
    "METRICS_PORT": port("METRICS_PORT", low=0),
    "METRICS_ADDR": lambda v: address("METRICS_ADDR", v),
    "JUPYTER_ENABLE": lambda v: boolean("JUPYTER_ENABLE", v),
    "KEEP_ALIVE": lambda v: boolean("KEEP_ALIVE", v),
    "JUPYTER_TOKEN": token,
    "JUPYTER_TOKEN_FILE": lambda v: absolute("JUPYTER_TOKEN_FILE", v),
    "JUPYTER_ARGS": jupyter_arguments,
    "PUBLIC_KEY": public_key,
    "DISKINFO_INTERVAL": lambda v: seconds("DISKINFO_INTERVAL", v),
    "DISKINFO_SUMMARY_INTERVAL": lambda v: seconds("DISKINFO_SUMMARY_INTERVAL", v),
    "STARTUP_HOOK_TIMEOUT": lambda v: whole("STARTUP_HOOK_TIMEOUT", v, 1, 86400),
    "TRAIN_STOP_TIMEOUT": lambda v: whole("TRAIN_STOP_TIMEOUT", v, 0, 86400),
    "TRAIN_LOG_MAX_BYTES": lambda v: size("TRAIN_LOG_MAX_BYTES", v),
    "TRAIN_LOG_BACKUPS": lambda v: whole("TRAIN_LOG_BACKUPS", v, 0, 1000),
    "SHM_MIN_MB": lambda v: whole("SHM_MIN_MB", v, 0, 2**31),
    "LOG_DIR": lambda v: absolute("LOG_DIR", v),
    "DISKINFO_STATE_DIR": lambda v: absolute("DISKINFO_STATE_DIR", v),
    "SSH_HOST_KEY_DIR": lambda v: absolute("SSH_HOST_KEY_DIR", v),
    "CA_BUNDLE_FILE": lambda v: absolute("CA_BUNDLE_FILE", v),
}


def check(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(canonical values of the settings set, DISKINFO_PATHS entries); Bad if one is bad."""
    values = {name: fix(env[name]) for name, fix in CHECKS.items() if name in env}
    for directory in env.get("STARTUP_HOOK_DIRS", "").split():
        absolute("STARTUP_HOOK_DIRS entry", directory)
    paths = path_list(env["DISKINFO_PATHS"]) if env.get("DISKINFO_PATHS", "").strip() else []
    ports: dict[str, str] = {}
    for name in ("SSH_PORT", "JUPYTER_PORT", "METRICS_PORT"):
        number = values.get(name, "0")
        if number == "0" or (name == "JUPYTER_PORT" and values.get("JUPYTER_ENABLE") == "0"):
            continue
        if number in ports:
            raise Bad(f"{ports[number]} and {name} are both {number}: each needs its own port")
        ports[number] = name
    return values, paths


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="settings.py")
    parser.add_argument("--paths-file")
    args = parser.parse_args(argv)
    try:
        values, paths = check(os.environ)
    except Bad as exc:
        print(exc, file=sys.stderr)
        return 2
    except Exception as exc:  # never a traceback at start-up: one line, and stop
        print(f"settings check failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.paths_file and paths:
        with open(args.paths_file, "wb") as out:
            out.write(b"".join(p.encode() + b"\0" for p in paths))
    sys.stdout.buffer.write(b"".join(f"{k}={v}".encode() + b"\0" for k, v in values.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
