"""Jupyter hardening: JUPYTER_TOKEN_FILE, no empty token, same-origin only, safe JUPYTER_ARGS."""

from __future__ import annotations

import contextlib
import json
import time

import pytest

requests = pytest.importorskip("requests")

pytestmark = pytest.mark.image

TOKEN = "f1le-t0ken-4a7c9e"


def test_token_file_is_the_token_and_foreign_origins_are_refused(
    container, jupyter_ready, tmp_path
):
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    running = container(
        env={"JUPYTER_ENABLE": "1", "JUPYTER_TOKEN_FILE": "/run/secrets/jupyter_token"},
        volumes={str(secret): {"bind": "/run/secrets/jupyter_token", "mode": "ro"}},
    )
    assert jupyter_ready(running) == TOKEN
    base = f"http://127.0.0.1:{running.ports['JUPYTER_PORT']}"
    assert requests.get(f"{base}/api/status", timeout=5).status_code == 403
    assert (
        requests.get(f"{base}/api/status", params={"token": "wrong"}, timeout=5).status_code == 403
    )
    auth = {"Authorization": f"token {TOKEN}"}
    assert requests.get(f"{base}/api/status", headers=auth, timeout=5).status_code == 200
    # A web page elsewhere must not drive the browser's logged-in session (allow_origin is not
    # "*"): with the login cookie, a foreign Origin is refused, the server's own is served.
    browser = requests.Session()
    lab = browser.get(f"{base}/lab", params={"token": TOKEN}, timeout=10)
    assert lab.status_code == 200
    # no "get notified about official Jupyter news?" popup: the plugin is off in page config
    page = json.loads(lab.text.split('id="jupyter-config-data" type="application/json">')[1]
                      .split("</script>")[0])  # fmt: skip
    assert "@jupyterlab/apputils-extension:announcements" in page["disabledExtensions"], page
    xsrf = {"X-XSRFToken": browser.cookies.get("_xsrf", "")}
    for origin, ok in (("http://evil.example", False), (base, True)):
        headers = {"Origin": origin, **xsrf}
        r = browser.get(f"{base}/api/status", headers=headers, timeout=5)
        assert (r.status_code == 200) is ok, (origin, r.status_code)
        assert r.headers.get("Access-Control-Allow-Origin") != "*"
        r = browser.post(f"{base}/api/contents", headers=headers, json={"type": "file"}, timeout=5)
        assert (r.status_code == 201) is ok, (origin, r.status_code)
    _, listing = running.exec("ls /workspace")
    assert listing.lower().count("untitled") == 1, listing  # only the same-origin request wrote


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"JUPYTER_TOKEN": ""}, "JUPYTER_TOKEN is empty"),
        # not a regular file (a device): refused before it is read
        ({"JUPYTER_TOKEN_FILE": "/dev/null"}, "JUPYTER_TOKEN_FILE=/dev/null cannot be used"),
        ({"JUPYTER_ARGS": "--IdentityProvider.token="}, "JUPYTER_ARGS may not set"),
        ({"JUPYTER_ARGS": "--ServerApp.allow_origin=*"}, "JUPYTER_ARGS may not set"),
    ],
    ids=["empty-token", "empty-token-file", "args-token", "args-origin"],
)
def test_no_token_means_no_server(container, env, message):
    running = container(env={"JUPYTER_ENABLE": "1", **env})
    code = running.wait(timeout=60)
    logs = running.logs()
    assert code != 0, logs[-2000:]
    assert any(line.startswith("ERROR") and message in line for line in logs.splitlines()), logs
    assert "spawned: 'jupyter'" not in logs


def test_jupyter_args_arrive_as_separate_arguments_without_a_shell(container):
    display = "http://x/$(touch /tmp/pwned); touch /tmp/pwned2"
    args = f"--ServerApp.base_url=/proj/ '--ServerApp.custom_display_url={display}'"
    running = container(
        env={
            "JUPYTER_ENABLE": "1",
            "JUPYTER_TOKEN": TOKEN,
            "JUPYTER_ARGS": args,
        }
    )
    url = f"http://127.0.0.1:{running.ports['JUPYTER_PORT']}/proj/api/status"

    deadline = time.monotonic() + 90
    while True:
        assert running.status() == "running", running.logs()[-3000:]
        with contextlib.suppress(requests.RequestException):
            if requests.get(url, params={"token": TOKEN}, timeout=3).status_code == 200:
                break
        assert time.monotonic() < deadline, f"no answer at /proj/: {running.logs()[-3000:]}"
        time.sleep(0.5)
    pid = running.supervisor_pid("jupyter")
    argv = running.read_file(f"/proc/{pid}/cmdline").split("\0")
    assert f"--ServerApp.custom_display_url={display}" in argv
    assert "--ServerApp.base_url=/proj/" in argv
    code, _ = running.exec("ls /tmp/pwned /tmp/pwned2")
    assert code != 0, "JUPYTER_ARGS went through a shell"


@pytest.mark.parametrize(
    "command",
    [
        ["jupyter", "lab", "--ip=0.0.0.0", "--allow-root", "--no-browser"],
        ["start-notebook.py"],
        ["/opt/venv/bin/jupyter", "lab"],  # with its path: the same request
    ],
    ids=["jupyter-lab", "start-notebook", "full-path"],
)
def test_a_jupyter_command_gets_the_images_jupyterlab(container, jupyter_ready, command):
    """`docker run IMAGE jupyter lab ...`, as with jupyter/docker-stacks, ran a second
    JupyterLab as the training command: it met the image's Jupyter configuration, printed
    "Jupyter refuses to start: token file ''" and ended the container with exit 1."""
    running = container(*command, env={"JUPYTER_ENABLE": "1", "JUPYTER_TOKEN": TOKEN})
    assert jupyter_ready(running) == TOKEN
    base = f"http://127.0.0.1:{running.ports['JUPYTER_PORT']}"
    auth = {"Authorization": f"token {TOKEN}"}
    assert requests.get(f"{base}/api/status", headers=auth, timeout=5).status_code == 200
    time.sleep(3)
    assert running.status() == "running"
    status = running.supervisor_status()
    assert status.get("jupyter") == "RUNNING" and status.get("train") != "RUNNING", status
    logs = running.logs()
    said = f"the command '{' '.join(command)}' asks for JupyterLab: this image serves it already"
    assert said in logs and "refuses to start" not in logs, logs[-3000:]


def test_a_jupyter_command_with_jupyter_off_is_one_line(container):
    running = container("jupyter", "lab", env={"JUPYTER_ENABLE": "0"})
    assert running.wait(timeout=60) == 1
    errors = [line for line in running.logs().splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "JUPYTER_ENABLE=0 turns off" in errors[0], errors
