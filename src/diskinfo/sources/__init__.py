"""Readers of kernel files. Each parser takes the file's text; only `read()` opens files."""


class ParseError(ValueError):
    """A kernel file's text is not in the expected format (raised by every parser here)."""


def line_after(text: str, head: str) -> str | None:
    """The rest of the first line of `text` that starts with `head` (None: no such line).

    str.find in C instead of splitting every line: the monitor's per-sample parsers want a
    few keys of files that list many (meminfo, blkio over every device, PSI). A match must
    start a line, so "8:1 " never matches inside "18:1 "."""
    if text.startswith(head):
        start = len(head)
    else:
        at = text.find("\n" + head)
        if at < 0:
            return None
        start = at + 1 + len(head)
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)]
