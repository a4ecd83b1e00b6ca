"""What the built image is, before anything runs: metadata, layers, nothing secret or cached."""

from __future__ import annotations

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.image


@pytest.fixture(scope="module")
def attrs(docker_client, image) -> dict:
    return docker_client.images.get(image).attrs


def inside(docker_client, image: str, script: str) -> str:
    """Run a shell script in a throwaway container without the entrypoint: its output."""
    out = docker_client.containers.run(
        image, ["-c", script], entrypoint="bash", network_mode="host", remove=True
    )
    return out.decode()


def test_metadata_labels_ports_health_and_entrypoint(attrs):
    config = attrs["Config"]
    labels = config["Labels"]
    for key in ("title", "version", "revision", "licenses", "base.name"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert {"8888/tcp", "22/tcp", "9101/tcp"} <= set(config["ExposedPorts"])
    assert config["Healthcheck"]["Test"][-1].endswith("healthcheck.sh")
    assert config["Entrypoint"] == ["/usr/local/bin/entrypoint.sh"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["DISKINFO_STATE_DIR"] == "/run/diskinfo"
    assert env["JUPYTER_PORT"] == "8888" and env["SSH_PORT"] == "22"
    assert env["METRICS_PORT"] == "9101"


CACHE_FILES = (
    "find /var/cache/apt /var/lib/apt/lists /root/.cache -type f ! -name lock 2>/dev/null | sort"
)


def test_no_host_keys_and_no_package_caches_in_the_image(docker_client, image, attrs):
    assert inside(docker_client, image, "ls /etc/ssh/ssh_host_* 2>/dev/null | wc -l").strip() == "0"
    ours = set(inside(docker_client, image, CACHE_FILES).split())
    base = attrs["Config"]["Labels"]["org.opencontainers.image.base.name"]
    try:  # a debootstrap stand-in base brings its own apt files: only ours count
        ours -= set(inside(docker_client, base, CACHE_FILES).split())
    except docker_errors(docker_client):
        pass
    assert not ours, f"package caches ended up in a layer: {sorted(ours)[:10]}"


def docker_errors(client) -> tuple[type[Exception], ...]:
    import docker

    return (docker.errors.ImageNotFound, docker.errors.ContainerError, docker.errors.APIError)


def test_tools_and_our_package_are_installed(docker_client, image):
    script = (
        "set -e; python3 -c 'import torch, diskinfo, supervisor, jupyterlab, psutil'; "
        "diskinfo --version; command -v sshd gcc; id jovyan"
    )
    if (ROOT / "scripts" / "validate-cuda").exists():
        script += "; validate-cuda --help >/dev/null && echo validate-cuda ok"
    out = inside(docker_client, image, script)
    assert "diskinfo" in out and "uid=1000(jovyan) gid=100" in out
    if (ROOT / "scripts" / "validate-cuda").exists():
        assert "validate-cuda ok" in out


def test_layers_are_ordered_by_how_often_they_change(attrs, docker_client, image):
    history = [h["CreatedBy"] for h in docker_client.images.get(image).history()][::-1]

    def first(marker: str) -> int:
        return next(i for i, line in enumerate(history) if marker in line)

    order = [
        first("apt-install"),
        first("torch=="),
        first("requirements.txt"),  # JupyterLab, supervisor, diskinfo's dependencies
        first("COPY src"),
        first("COPY entrypoint.sh"),
    ]
    assert order == sorted(order), history


def test_dockerfile_has_a_devel_target_and_defaults_to_runtime():
    """The devel stage needs NVIDIA's apt repository, so it is only built on the real base."""
    text = (ROOT / "Dockerfile").read_text()
    stages = [line.split() for line in text.splitlines() if line.startswith("FROM ")]
    assert ["FROM", "runtime", "AS", "devel"] in stages
    assert stages[-1] == ["FROM", "runtime"], "the last stage (docker build's default) is runtime"
    assert '"cuda-nvcc-$v"' in text  # of the CUDA line: cuda-nvcc-11-8 by default
    assert "ARG BASE_IMAGE=nvidia/cuda:11.8.0-base-ubuntu22.04" in text
    assert "ARG CUDA=11.8" in text
    assert "ARG TORCH_VERSION=2.7.1" in text
    assert "https://download.pytorch.org/whl/cu${CUDA//./}" in text
    assert "# syntax=" not in text, "a syntax line pulls a frontend image from a registry"


LIB = "/usr/local/lib/pytorch-cuda"  # the Dockerfile's PYTORCH_CUDA_LIB
# each of its folders and the repository's folder that lands there as it sits
LIB_FOLDERS = {name: ROOT / "docker" / name for name in ("start", "run", "shared")}
LIB_FOLDERS["scripts/validate_cuda"] = ROOT / "scripts" / "validate_cuda"


def test_the_script_folders_are_the_repositorys_and_roots_alone(docker_client, image):
    """What root runs at start and afterwards is the repository's docker/start, run and shared
    file for file (no flattening that a test would have to rebuild), owned by root and
    writable by nobody else: jovyan can neither change a script nor add one."""
    listing = inside(
        docker_client,
        image,
        f"cd {LIB} && find . -name __pycache__ -prune -o -printf '%P\\t%y\\t%u\\t%m\\n'",
    )
    entries = [line.split("\t") for line in listing.splitlines()]
    assert {"shared/safe_paths.py", "start/banner.py"} <= {e[0] for e in entries}, listing
    files = {path for path, kind, _, _ in entries if kind == "f"}
    expected = {"scripts/validate-cuda"}
    for name, folder in LIB_FOLDERS.items():
        expected |= {
            f"{name}/{p.relative_to(folder)}"
            for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }
    assert files == expected
    loose = [e for e in entries if e[1] not in "fd" or e[2] != "root" or int(e[3], 8) & 0o022]
    assert loose == [], "root runs these: only root may write them"
