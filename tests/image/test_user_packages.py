"""A user adds Python packages: `pip install` in the running container (the training command,
a notebook, an SSH session) goes to NB_USER's own environment over the image's, and a derived
image (`FROM` + `RUN pip install`) bakes them in. Root never runs what NB_USER installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.wheels import build_wheel

pytestmark = pytest.mark.image

USER_VENV = "/opt/user-venv"
WHEEL = "demo_pkg-0.1-py3-none-any.whl"
CHECK = (  # one write(2) per line: torchrun's two workers print at the same moment
    "import os, sys, demo_pkg, torch; "
    "os.write(1, ('CHECK %s %s %s\\n' % (os.environ.get('RANK', '-'), sys.prefix, demo_pkg.VALUE))"
    ".encode())"
)


SOURCE = b"import numpy\nVALUE = 42\n\n\ndef main():\n    print('DEMO', VALUE)\n"


def wheel(directory: Path) -> Path:
    """A pure-Python wheel that needs numpy (in the image): pip must find it already there,
    offline, rather than fetch it into the user's environment."""
    return build_wheel(
        directory,
        "demo-pkg",
        "0.1",
        {"demo_pkg/__init__.py": SOURCE},
        requires=("numpy",),
        entry_points="[console_scripts]\ndemo-pkg = demo_pkg:main\n",
    )


def test_pip_install_in_the_container_reaches_training_notebooks_and_ssh(
    container, tmp_path: Path, ssh_key, ssh_client, ssh_run, wait_until
) -> None:
    """With a renumbered user (-e NB_UID) too: the environment is handed over at start."""
    wheel(tmp_path)
    command = (
        f'pip install --no-index code/{WHEEL} && python -c "{CHECK}" && demo-pkg'
        f' && torchrun --nproc-per-node=2 --no-python python -c "{CHECK}"'
    )
    running = container(
        "bash",
        "-c",
        command,
        env={"NB_UID": "1234", "KEEP_ALIVE": "1", "PUBLIC_KEY": ssh_key.public},
        volumes={str(tmp_path): {"bind": "/workspace/code", "mode": "ro"}},
    )
    wait_until(lambda: "training exited with status" in running.logs(), 240, "no end")
    logs = running.logs()
    assert "training exited with status 0" in logs and "DEMO 42" in logs, logs[-3000:]
    assert "Requirement already satisfied: numpy in /opt/venv/" in logs, logs[-3000:]
    checks = sorted(line for line in logs.splitlines() if line.startswith("CHECK"))
    assert checks == [f"CHECK {rank} {USER_VENV} 42" for rank in ("-", "0", "1")], logs[-3000:]

    # a notebook: the kernel Jupyter starts (its kernel spec, as the server resolves it)
    code, out = running.exec(
        '/opt/venv/bin/python -c "from jupyter_client.manager import start_new_kernel; '
        "km, kc = start_new_kernel(kernel_name='python3'); "
        "r = kc.execute_interactive('import sys, demo_pkg; print(sys.prefix, demo_pkg.VALUE)', "
        "timeout=60, output_hook=lambda m: print(m['content'].get('text', ''), end='')); "
        'km.shutdown_kernel()"',
        user="1234",
        timeout=120,
    )
    assert code == 0 and f"{USER_VENV} 42" in out, out

    # an SSH session
    client = ssh_client(running, key=ssh_key.key)
    status, out = ssh_run(client, 'which pip; python -c "import demo_pkg; print(demo_pkg.VALUE)"')
    assert status == 0 and out.split() == [f"{USER_VENV}/bin/pip", "42"], out

    # root: never the user's environment, and the image's stays root's
    code, out = running.exec('printf "%s" "$PATH"; python -c "import demo_pkg"')
    assert code != 0 and USER_VENV not in out.split("Traceback")[0], out
    assert running.exec("stat -c %u:%g /opt/user-venv /opt/user-venv/bin")[1].split() == [
        "1234:100",
        "1234:100",
    ]
    site = "/opt/venv/lib/python3*/site-packages"
    assert running.exec(f"touch {site}/x", user="1234")[0] != 0


def test_a_derived_image_bakes_packages_in(docker_client, image: str, container, tmp_path) -> None:
    """The way to keep packages for every run: FROM the image, RUN pip install, as root."""
    wheel(tmp_path)
    dockerfile = f"FROM {image}\nCOPY {WHEEL} /tmp/\nRUN pip install --no-index /tmp/{WHEEL}\n"
    (tmp_path / "Dockerfile").write_text(dockerfile)
    tag = "pytorch-cuda-diskinfo:test-derived"
    docker_client.images.build(path=str(tmp_path), tag=tag, network_mode="host", rm=True)
    try:
        derived = type(container)(docker_client, tag)
        try:
            running = derived("python", "-c", CHECK)
            assert running.wait(timeout=120) == 0, running.logs()[-3000:]
            assert f"CHECK - {USER_VENV} 42" in running.logs()
        finally:
            derived.cleanup()
    finally:
        docker_client.images.remove(tag, force=True)
