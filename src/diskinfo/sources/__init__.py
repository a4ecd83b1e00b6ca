"""Readers of kernel files. Each parser takes the file's text; only `read()` opens files."""


class ParseError(ValueError):
    """A kernel file's text is not in the expected format (raised by every parser here)."""
