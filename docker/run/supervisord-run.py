"""supervisord as PID 1, exiting with the training command's exit code.

supervisord itself always exits 0, but `docker run IMAGE cmd` must end with cmd's code. So this
runs supervisord's own main() in this process (PID 1 keeps receiving `docker stop`'s SIGTERM and
reaping orphans), and when it returns, exits with the status run-train.sh recorded.

Before that it writes supervisord's config from its template with a fresh password for the
control socket: supervisord 4 logs a CRIT line at every start for a socket without one, and
supervisorctl reads its credentials only from the config file itself (no [include], no
environment), so the running config is that file, readable by root alone.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

from supervisor import supervisord

from diskinfo.fileio import write_atomic

if __name__ == "__main__":  # root runs it as `python3 -I`, which leaves the working and the
    # script's own directory off sys.path: what both phases use comes from the root-owned
    # shared/ beside run/, here as in the checkout (docker/shared/)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))
import safe_paths

TEMPLATE = Path("/etc/pytorch-cuda/supervisord.conf.in")
MARKER = "; credentials added here\n"
NO_STATE = "supervisord-run.py: STARTUP_STATE_DIR not set: the image sets it (Dockerfile ENV)"
USERNAME = "pytorch-cuda"


def with_credentials(template: str, password: str) -> str:
    """The template with username/password under each section the marker precedes."""
    if template.count(MARKER) != 2:
        raise ValueError("supervisord.conf.in must mark [unix_http_server] and [supervisorctl]")
    out = []
    for part in template.split(MARKER):
        if out:
            header, _, rest = part.partition("\n")
            part = f"{header}\nusername={USERNAME}\npassword={password}\n{rest}"
        out.append(part)
    return "".join(out)


def write_config(config: Path, template: Path = TEMPLATE) -> None:
    """template -> config, mode 0600, a new password at every start (docker restart too)."""
    text = with_credentials(template.read_text(), secrets.token_hex(16))
    write_atomic(config, text, mode=0o600)


def exit_code(state: Path) -> int:
    """The training command's status; 0 when there was none; 137 if it never reported (SIGKILL)."""
    try:
        # train/ is NB_USER's and we are root: no link followed, never a blocking FIFO
        return int(safe_paths.read_small(str(state / "train" / "exit"), 64).strip())
    except (OSError, ValueError, safe_paths.Refused):
        return 137 if (state / "train.args").exists() else 0


def drain_log_writers(timeout: float = 1.0) -> None:
    """Let the log writers (log-tee.py as NB_USER, entrypoint.sh) write supervisord's last lines.

    They read pipes whose write ends we hold; every process dies with PID 1, so close them and
    wait a moment for the writers to end.
    """
    os.closerange(3, 4096)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.05)
        except ChildProcessError:
            return


if __name__ == "__main__":
    state = Path(os.environ.get("STARTUP_STATE_DIR") or sys.exit(NO_STATE))
    # per start, beside the other runtime state; /etc/pytorch-cuda/supervisord.conf links here,
    # so `supervisorctl -c /etc/pytorch-cuda/supervisord.conf` works and /etc never changes
    write_config(state / "supervisord.conf")
    supervisord.main(sys.argv[1:])
    drain_log_writers()
    sys.exit(exit_code(state))
