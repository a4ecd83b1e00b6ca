"""SSH sessions see the container's environment (secrets left out) and start in /workspace;
host keys are per container unless SSH_HOST_KEY_DIR asks for stable ones."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.image

SECRETS = {
    "JUPYTER_TOKEN": "jt-0d5b1c",
    "WANDB_API_KEY": "wk-77e1",
    "AWS_SECRET_ACCESS_KEY": "aws-5ecret",
    "DB_PASSWORD": "pw-1234",
    "HF_TOKEN": "hf-abcd",
}


@pytest.fixture(scope="module")
def env_container(module_container, ssh_key):
    env = {
        "PUBLIC_KEY": ssh_key.public,
        "MY_SETTING": "it's $HOME; here",
        "LD_LIBRARY_PATH": "/opt/extra/lib",
        **SECRETS,
    }
    return module_container(env=env)


def test_ssh_command_sees_torch_env_and_no_secrets(env_container, ssh_key, ssh_client, ssh_run):
    client = ssh_client(env_container, key=ssh_key.key)
    version = 'python -c "import torch; print(torch.__version__)"'
    status, out = ssh_run(client, version, timeout=60)
    code, image_torch = env_container.exec(version, timeout=60)
    assert code == 0 and image_torch.strip(), image_torch
    assert status == 0 and out.strip() == image_torch.strip(), out
    status, out = ssh_run(client, 'printf "%s|%s|%s" "$MY_SETTING" "$LD_LIBRARY_PATH" "$PWD"')
    assert out == "it's $HOME; here|/opt/extra/lib|/workspace", out
    env = dict(e.split("=", 1) for e in env_container.obj.attrs["Config"]["Env"])
    image_path = env["PATH"]
    _, out = ssh_run(client, 'printf "%s" "$PATH"')
    assert out == f"{env['USER_VENV']}/bin:{image_path}"  # NB_USER's packages first
    _, out = ssh_run(client, "env")
    for name, value in {**SECRETS, "PUBLIC_KEY": ssh_key.public}.items():
        assert f"{name}=" not in out and value not in out, name


def test_interactive_login_gets_the_same(env_container, ssh_key, ssh_client):
    client = ssh_client(env_container, key=ssh_key.key)
    shell = client.invoke_shell()
    shell.send(b'echo "MARK<$MY_SETTING|$PWD|${JUPYTER_TOKEN-unset}>"; exit\n')
    out, deadline = b"", time.monotonic() + 20
    while time.monotonic() < deadline and not shell.exit_status_ready():
        if shell.recv_ready():
            out += shell.recv(65536)
        time.sleep(0.1)
    while shell.recv_ready():
        out += shell.recv(65536)
    assert "MARK<it's $HOME; here|/workspace|unset>" in out.decode(errors="replace"), out


def test_no_world_readable_file_holds_a_secret(env_container):
    values = " ".join(f"-e '{v}'" for v in SECRETS.values())
    _, out = env_container.exec(
        "find /etc /run /tmp /home /workspace -xdev -type f -perm -o=r -print0 2>/dev/null"
        f" | xargs -0 grep -lF {values} 2>/dev/null; true"
    )
    assert out.strip() == "", f"world-readable files hold secrets: {out}"
    _, out = env_container.exec("stat -c '%a %U' /etc/pytorch-cuda/ssh-env.sh")
    assert out.split() == ["640", "root"], out


def _host_key(running, ssh_client, ssh_key) -> str:
    client = ssh_client(running, key=ssh_key.key)
    key = client.get_transport().get_remote_server_key()
    return f"{key.get_name()} {key.get_base64()}"


def test_host_keys_differ_per_container_by_default(container, ssh_key, ssh_client):
    first = container(env={"PUBLIC_KEY": ssh_key.public})
    second = container(env={"PUBLIC_KEY": ssh_key.public})
    assert _host_key(first, ssh_client, ssh_key) != _host_key(second, ssh_client, ssh_key)


def test_host_keys_are_reused_from_ssh_host_key_dir(container, ssh_key, ssh_client, tmp_path):
    keys = tmp_path / "hostkeys"
    keys.mkdir()
    options = {
        "env": {"PUBLIC_KEY": ssh_key.public, "SSH_HOST_KEY_DIR": "/keys"},
        "volumes": {str(keys): {"bind": "/keys", "mode": "rw"}},
    }
    first = container(**options)
    key_before = _host_key(first, ssh_client, ssh_key)
    first.obj.remove(force=True)  # recreate the container: same volume, new container
    second = container(**options)
    assert _host_key(second, ssh_client, ssh_key) == key_before
    assert (keys / "ssh_host_ed25519_key").stat().st_mode & 0o077 == 0
