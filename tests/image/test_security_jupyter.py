"""jovyan writes Jupyter configuration of every form Jupyter reads, and Jupyter restarts: the
token and XSRF checks stay on (a token holder must not turn them off for others); the token
file cannot be emptied, and an empty token stops the server."""

from __future__ import annotations

import json

import pytest

from tests.helpers import net

pytestmark = pytest.mark.image

TOKEN = "jupyter-s3cret-token"
OPEN = {
    "IdentityProvider": {"token": ""},
    "ServerApp": {
        "token": "",
        "password": "",
        "disable_check_xsrf": True,
        "tornado_settings": {"disable_check_xsrf": True},
        "allow_origin": "*",
    },
    "NotebookApp": {"token": "", "disable_check_xsrf": True},
}
PY = (
    "open('/tmp/config-ran-{tag}', 'w').write('ran')\n"
    "c.IdentityProvider.token = ''\n"
    "c.ServerApp.token = ''\n"
    "c.ServerApp.disable_check_xsrf = True\n"
    "c.ServerApp.tornado_settings = {{'disable_check_xsrf': True}}\n"
)
NAMES = ("jupyter_config", "jupyter_server_config", "jupyter_lab_config", "jupyter_notebook_config")
DIRS = ("~/.jupyter", "~/.local/etc/jupyter", "/workspace/.cfg-dir", "/workspace/.cfg-path")


def _plant(running) -> None:
    script = []
    for n, directory in enumerate(DIRS):
        script.append(f"mkdir -p {directory}/jupyter_server_config.d")
        script.append(
            f"echo '{json.dumps(OPEN)}' | tee {directory}/jupyter_server_config.d/zz-open.json"
            + "".join(f" {directory}/{name}.json" for name in NAMES)
            + " >/dev/null"
        )
        for m, name in enumerate(NAMES):
            body = PY.format(tag=f"{n}{m}").replace("'", "'\\''")
            script.append(f"printf '%s' '{body}' >{directory}/{name}.py")
    code, out = running.exec(" && ".join(script), user="jovyan")
    assert code == 0, out


def test_user_config_cannot_switch_the_token_or_xsrf_off(container):
    import requests

    running = container(
        env={
            "JUPYTER_ENABLE": "1",
            "JUPYTER_TOKEN": TOKEN,
            "JUPYTER_CONFIG_DIR": "/workspace/.cfg-dir",
            "JUPYTER_CONFIG_PATH": "/workspace/.cfg-path",
        }
    )
    net.wait_until(
        lambda: running.supervisor_status().get("jupyter") == "RUNNING", 90, "no jupyter"
    )
    _plant(running)
    old = running.supervisor_pid("jupyter")
    # jovyan can end Jupyter at will; supervisord starts it again with whatever config it reads
    running.exec(f"kill {old}", user="jovyan")
    net.wait_until(lambda: running.supervisor_pid("jupyter") not in (0, old), 60, "no restart")
    base = f"http://127.0.0.1:{running.ports['JUPYTER_PORT']}"
    net.wait_until(
        lambda: requests.get(f"{base}/api/status", params={"token": TOKEN}, timeout=3).ok,
        90,
        lambda: running.exec("tail -30 /workspace/logs/jupyter.log")[1],
    )
    assert requests.get(f"{base}/api/kernels", timeout=5).status_code == 403
    assert requests.post(f"{base}/api/kernels", timeout=5).status_code == 403
    # a browser session: logged in by cookie, but a POST without the XSRF token is refused
    session = requests.Session()
    assert session.get(f"{base}/lab", params={"token": TOKEN}, timeout=10).ok
    assert session.post(f"{base}/api/kernels", timeout=10).status_code == 403
    assert running.exec("ls /tmp/config-ran-* 2>/dev/null")[1] == "", "user config code ran"
    assert "JUPYTER_CONFIG_DIR is ignored" in running.logs()

    # the token file: readable by jovyan, but neither writable nor replaceable
    token_file = "/run/pytorch-cuda/jupyter-token"
    assert running.exec(f"cat {token_file}", user="jovyan")[1] == TOKEN
    assert running.exec(f": >{token_file}", user="jovyan")[0] != 0
    assert running.exec(f"rm -f {token_file}", user="jovyan")[0] != 0
    # and an empty token stops the server instead of opening it
    code, out = running.exec(
        ": >/tmp/empty; JUPYTER_CONFIG_DIR=/run/pytorch-cuda/jupyter-config JUPYTER_CONFIG_PATH="
        f" JUPYTER_TOKEN_FILE=/tmp/empty JUPYTER_PORT={net.free_port()}"
        " timeout 60 jupyter-lab --no-browser",
        user="jovyan",
        timeout=90,
    )
    assert code not in (0, 124) and "refuses to start: the token in /tmp/empty is empty" in out
    # `jupyter lab` typed in a shell of the container: no token file, so no server, and why
    code, out = running.exec(
        f"env -u JUPYTER_TOKEN_FILE timeout 60 jupyter-lab --no-browser --port={net.free_port()}",
        user="jovyan",
        timeout=90,
    )
    assert code not in (0, 124), out
    assert "refuses to start without a token: this image's JupyterLab already runs" in out, out


def test_no_origin_is_echoed_to_a_cross_origin_request_with_the_token(container):
    import requests

    running = container(env={"JUPYTER_ENABLE": "1", "JUPYTER_TOKEN": TOKEN})
    base = f"http://127.0.0.1:{running.ports['JUPYTER_PORT']}"
    net.wait_until(
        lambda: running.supervisor_status().get("jupyter") == "RUNNING", 90, "no jupyter"
    )
    net.wait_until(
        lambda: requests.get(f"{base}/api/status", params={"token": TOKEN}, timeout=3).ok,
        90,
        lambda: running.exec("tail -30 /workspace/logs/jupyter.log")[1],
    )
    evil = {"Origin": "https://evil.example"}
    answer = requests.get(f"{base}/api/contents", params={"token": TOKEN}, headers=evil, timeout=5)
    assert "Access-Control-Allow-Origin" not in answer.headers, answer.headers
    # the browser's own requests (Origin = the server itself) work as before
    port = running.ports["JUPYTER_PORT"]
    own = {"Origin": f"http://127.0.0.1:{port}"}
    assert requests.get(f"{base}/api/contents", params={"token": TOKEN}, headers=own, timeout=5).ok
