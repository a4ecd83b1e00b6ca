"""authorized_keys lines: keep every valid key line (options included), name the others.

A line is `[options] TYPE BASE64 [comment]` as sshd(8) reads it; options such as
`from="10.0.0.0/8",no-pty` may hold quoted commas and spaces. A line is a key when its type is
one sshd knows and its base64 blob decodes and names the same type. Bad lines are reported by
number and kind, never echoed: a private key pasted by mistake must not reach a log.

  ssh_keys.py LABEL    the key lines of stdin; a warning on stderr for each bad line
(PUBLIC_KEY is checked by settings.py with key_lines: a bad line there stops the start.)
"""

from __future__ import annotations

import binascii
import re
import struct
import sys

BASE_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
KEY_TYPES = frozenset(BASE_TYPES) | {t.split("@")[0] + "-cert-v01@openssh.com" for t in BASE_TYPES}
NO_TYPE = "no known key type (ssh-ed25519, ssh-rsa, ecdsa-sha2-..., sk-...)"
EXPECTED = "[options] TYPE BASE64 [comment], e.g. the line of ~/.ssh/id_ed25519.pub"
# Canonical base64 as ssh-keygen writes it: whole quads, `=` only to close the last one. Checked
# here because a2b_base64's strict_mode needs Python 3.11 and the real base runs 3.10 (where the
# keyword is a TypeError); one check for both, so a key passes or fails the same on each.
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def strict_b64decode(text: str) -> bytes:
    """The bytes of canonical base64 `text`; binascii.Error for anything else (spaces included)."""
    if not _BASE64.fullmatch(text):
        raise binascii.Error("not canonical base64")
    return binascii.a2b_base64(text.encode("ascii"))


def _split_options(line: str) -> tuple[str, str]:
    """(options, rest): options end at the first whitespace outside double quotes."""
    quoted = escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quoted:
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch in " \t" and not quoted:
            return line[:i], line[i:].lstrip()
    raise ValueError("unbalanced quotes in its options" if quoted else NO_TYPE)


def check(line: str) -> str:
    """The line itself if it is a public key line, else ValueError saying what it is."""
    if "PRIVATE KEY" in line or line.startswith("-----"):
        raise ValueError("it is part of a PRIVATE key: pass the .pub file's line instead")
    first = line.split(None, 1)[0]
    rest = line if first in KEY_TYPES else _split_options(line)[1]
    fields = rest.split()
    if len(fields) < 2 or fields[0] not in KEY_TYPES:
        raise ValueError(NO_TYPE)
    try:
        blob = strict_b64decode(fields[1])
        (size,) = struct.unpack(">I", blob[:4])
        named = blob[4 : 4 + size].decode()
    except (binascii.Error, struct.error, UnicodeDecodeError):
        raise ValueError(f"its {fields[0]} key data is not valid base64 key data") from None
    if named != fields[0]:
        raise ValueError(f"its key data is a {named!r} key, not {fields[0]}")
    return line


def key_lines(text: str) -> tuple[list[str], list[tuple[int, str]]]:
    """(valid lines, [(line number, why)]) of an authorized_keys text; blanks and # skipped."""
    keys, bad = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            keys.append(check(line))
        except ValueError as exc:
            bad.append((number, str(exc)))
    return keys, bad


def main(argv: list[str]) -> int:
    label = argv[0] if argv else "stdin"
    keys, bad = key_lines(sys.stdin.read())
    for number, why in bad:
        print(f"{label} line {number} skipped, not an SSH public key: {why}", file=sys.stderr)
    for key in keys:
        print(key)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
