"""JupyterLab in the container: every address, the configured port, /workspace, a token.

Loaded from /etc/jupyter, root-owned; start-jupyter.sh makes sure Jupyter reads no
configuration NB_USER can write, so nothing can override what is set here. The token is read
from the root-owned file named by JUPYTER_TOKEN_FILE and an empty one stops the server: it
never runs without authentication.
"""

import os

c = get_config()  # noqa: F821 - injected by Jupyter's config loader


def _token() -> str:
    path = os.environ.get("JUPYTER_TOKEN_FILE", "")
    if not path:  # a `jupyter lab` typed in a shell of the container (SSH, docker exec)
        raise SystemExit(
            "Jupyter refuses to start without a token: this image's JupyterLab already runs,"
            " at the URL in the banner (docker logs); a second server needs JUPYTER_TOKEN_FILE"
            " naming a file that holds its token (and another --port)"
        )
    try:
        with open(path) as f:
            token = f.read().strip()
    except OSError as exc:
        raise SystemExit(f"Jupyter refuses to start: token file {path!r}: {exc}") from None
    if not token:
        raise SystemExit(f"Jupyter refuses to start: the token in {path} is empty")
    return token


c.ServerApp.ip = "0.0.0.0"
if "JUPYTER_PORT" in os.environ:  # the image's ENV; a server typed in a shell may pass --port
    c.ServerApp.port = int(os.environ["JUPYTER_PORT"])
c.ServerApp.port_retries = 0  # a taken port is an error, not a silent move to another port
c.ServerApp.root_dir = "/workspace"
c.ServerApp.open_browser = False
c.ServerApp.allow_remote_access = True
# Authentication: the token, always; cookies need the XSRF token; no password login.
c.IdentityProvider.token = _token()
c.ServerApp.disable_check_xsrf = False
c.ServerApp.allow_unauthenticated_access = False
# Same-origin requests only: never "*", which lets any web page the user visits drive the server.
# With both empty, Jupyter echoes any Origin back to a request that carries the token, so a web
# page holding a leaked token could read the answers; a pattern that matches nothing turns that
# echo off. Same-origin requests and websockets are checked against Host first, unchanged.
c.ServerApp.allow_origin = ""
c.ServerApp.allow_origin_pat = "(?!)"
c.ServerApp.terminado_settings = {"shell_command": ["/bin/bash", "-l"]}
