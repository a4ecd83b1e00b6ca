"""PNG output of `diskinfo report` and `diskinfo tune`: matplotlib (the optional dependency
`diskinfo[report]`) is imported here only, and a figure is written whole or not at all."""

from __future__ import annotations

import io
from pathlib import Path
from types import ModuleType
from typing import Any

from diskinfo.fileio import write_atomic


def pyplot() -> ModuleType | None:
    """matplotlib.pyplot on the file-only Agg backend; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(fig: Any, path: Path, dpi: int) -> None:
    """Render in memory, then replace `path` atomically, owned by the user the files are for
    (no half-written PNG next to the logs); the figure is closed either way. OSError as
    write_atomic raises it."""
    plt = pyplot()
    try:
        image = io.BytesIO()
        fig.savefig(image, format="png", dpi=dpi)
        write_atomic(path, image.getvalue(), owned=True)
    finally:
        if plt is not None:  # a figure exists: so does matplotlib
            plt.close(fig)
