"""PUBLIC_KEY's base64 check (docker/start/ssh_keys.py) on the real base's Python 3.10 and on 3.11.

No 3.10 interpreter can be had on this machine, so the two halves are tested apart: the parser
runs against binascii as 3.10 has it (a2b_base64 without strict_mode), and its own strict
decoding is compared with 3.11's strict_mode over every short string of base64's hard cases.
`make lint`'s vermin run checks the rest of the image's code against 3.10's API.
"""

from __future__ import annotations

import binascii
import itertools
import re
import sys

import pytest

from tests.helpers.scripts import load

ssh_keys = load("start/ssh_keys.py")

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMy/wCKJ7GnsawncSSEJxyqhGZ1b5lq7wc4Py7LYsVxV me@host"
_REAL_A2B = binascii.a2b_base64


def _a2b_base64_of_python_3_10(data, /):
    """binascii.a2b_base64's 3.10 signature: strict_mode is a TypeError there."""
    return _REAL_A2B(data)


@pytest.fixture
def python_3_10_binascii(monkeypatch):
    monkeypatch.setattr(binascii, "a2b_base64", _a2b_base64_of_python_3_10)


def test_a_key_passes_with_python_3_10s_binascii(python_3_10_binascii):
    assert ssh_keys.key_lines(KEY) == ([KEY], [])


@pytest.mark.parametrize(
    "blob",
    [
        "AAAAC3NzaC1lZDI1NTE5AAAAIMy/wCKJ7GnsawncSSEJxyqhGZ1b5lq7wc4Py7LYsVx",  # a char short
        "AAAAC3NzaC1lZDI1NTE5AAAAIMy/wCKJ7GnsawncSSEJxyqhGZ1b5lq7wc4Py7LYsVxV=AA",
        "AAAAC3NzaC1lZDI1NTE5AAAAIMy/wCKJ7Gnsaw*cSSEJxyqhGZ1b5lq7wc4Py7LYsVxV",
        "=AAAAC3NzaC1lZDI1NTE5AAAAIMy/wCKJ7GnsawncSSEJxyqhGZ1b5lq7wc4Py7LYsVxV",
    ],
)
def test_bad_key_data_is_named_with_python_3_10s_binascii(python_3_10_binascii, blob):
    keys, bad = ssh_keys.key_lines(f"ssh-ed25519 {blob}")
    assert keys == [] and bad == [(1, "its ssh-ed25519 key data is not valid base64 key data")]


def _decode(function, text: str) -> bytes | None:
    try:
        return function(text)
    except binascii.Error:
        return None


@pytest.mark.skipif(sys.version_info < (3, 11), reason="strict_mode, the reference, is 3.11's")
def test_strict_decoding_is_python_3_11s_strict_mode():
    """Every string up to 6 characters over letters, both symbols, padding, whitespace and a
    stray character: whatever strict_mode refuses is refused, whatever is accepted decodes the
    same. The one difference: padding after a complete quad ('AAAA=') that 3.11 lets through,
    which ssh-keygen never writes, is refused."""

    def strict_3_11(text: str) -> bytes:
        return _REAL_A2B(text.encode(), strict_mode=True)

    more_padding = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?=+")
    checked = 0
    for length in range(7):
        for chars in itertools.product("A/+= \n*", repeat=length):
            text = "".join(chars)
            ours, reference = _decode(ssh_keys.strict_b64decode, text), _decode(strict_3_11, text)
            checked += 1
            if ours != reference:
                assert ours is None and more_padding.fullmatch(text), repr(text)
    assert checked > 100_000
