"""JupyterLab in the container: every address, the configured port, /workspace, a token.

The token is read by jupyter_server from JUPYTER_TOKEN_FILE (set by start-jupyter.sh); this
file only makes sure it is never switched off and that the server binds where users expect.
"""

import os

c = get_config()  # noqa: F821 - injected by Jupyter's config loader

c.ServerApp.ip = "0.0.0.0"
c.ServerApp.port = int(os.environ.get("JUPYTER_PORT", "8888"))
c.ServerApp.port_retries = 0  # a taken port is an error, not a silent move to another port
c.ServerApp.root_dir = "/workspace"
c.ServerApp.open_browser = False
c.ServerApp.allow_remote_access = True
# Same-origin requests only: never "*", which lets any web page the user visits drive the server.
c.ServerApp.allow_origin = ""
c.ServerApp.allow_origin_pat = ""
c.ServerApp.terminado_settings = {"shell_command": ["/bin/bash", "-l"]}
