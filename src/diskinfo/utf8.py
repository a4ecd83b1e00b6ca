"""Text as JSON can hold it: the collectors clean what the kernel hands over, the JSONL sink
whatever still slips through."""

from __future__ import annotations


def utf8_text(text: str) -> str:
    """`text` as valid UTF-8, which JSON needs: the bytes of a name the kernel handed over
    undecodable (psutil and os decode with surrogateescape: a program named `caf\\xe9-reader`
    in Latin-1) become `\\xNN` escapes, so a record holding it is still written."""
    try:
        text.encode()
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate that no byte stands for
            return text.encode("utf-8", "backslashreplace").decode()
