"""JupyterLab's own entry point (the `jupyter-lab` command), except that a stop that comes
while it is still starting is a clean exit, status 0.

JupyterLab installs its SIGTERM handler with the server, a second or two after it starts;
before that Python's default ends the process by the signal. So a container whose command
took a second ended with "WARN stopped: jupyter (terminated by SIGTERM)" in docker logs after
a clean run (`docker run IMAGE python -c "import torch; print(torch.__version__)"`).
"""

import signal
import sys

signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))

from jupyterlab.labapp import main  # noqa: E402 - after the handler: importing is the slow part

sys.exit(main())
