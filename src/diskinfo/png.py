"""PNG output of `diskinfo report` and `diskinfo tune`: matplotlib (the optional dependency
`diskinfo[report]`) is imported here only, and a figure is written whole or not at all."""

from __future__ import annotations

import atexit
import io
import os
import shutil
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from diskinfo.fileio import write_atomic


def pyplot() -> ModuleType | None:
    """matplotlib.pyplot on the file-only Agg backend; None when matplotlib is missing. A
    user with no writable home (`docker run -u "$(id -u)"`: HOME is /) gets a temporary
    config folder, as matplotlib would make, without its two lines of warning."""
    config = os.path.join(os.path.expanduser("~"), ".config")
    if "MPLCONFIGDIR" not in os.environ and not os.access(
        config if os.path.exists(config) else os.path.dirname(config), os.W_OK
    ):
        os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="diskinfo-matplotlib-")
        atexit.register(shutil.rmtree, os.environ["MPLCONFIGDIR"], True)
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
