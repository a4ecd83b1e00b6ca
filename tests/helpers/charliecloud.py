"""Charliecloud for the tests: the image under test as a directory that `ch-run` starts as an
ordinary user, the way Apptainer, enroot and Charliecloud run it on a cluster (the submitting
user, the image read-only, no ENTRYPOINT).

`ch-convert -i docker` unpacks an image through a gzipped `docker export`: the full image
(6.5 GB, 5.5 GB of it the CUDA torch wheels) took 6 min on this kind of machine. The tests
convert a slim image instead: the image under test with torch, its CUDA libraries and triton
removed, flattened by the export (everything else, the entrypoint, PYTORCH_CUDA_LIB and
diskinfo included, is the image's own). Converted once per image ID into CACHE, where every
test session (tests/image, the Slurm test) finds it; the torch path itself is tested in Docker
(tests/image/test_unprivileged.py), where the full image already is.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

CACHE = Path("/var/tmp/diskinfo-charliecloud")
TOOLS = ("ch-convert", "ch-run")
SLIM = """\
FROM {image}
RUN rm -rf /opt/venv/lib/python3*/site-packages/torch \\
    /opt/venv/lib/python3*/site-packages/torch-* \\
    /opt/venv/lib/python3*/site-packages/torchvision* \\
    /opt/venv/lib/python3*/site-packages/torchaudio* \\
    /opt/venv/lib/python3*/site-packages/triton* \\
    /opt/venv/lib/python3*/site-packages/nvidia* \\
    /opt/venv/lib/python3*/site-packages/cusparselt \\
    /opt/venv/lib/python3*/site-packages/sympy* \\
    /opt/venv/lib/python3*/site-packages/networkx* \\
    /opt/venv/lib/python3*/site-packages/functorch \\
    /opt/venv/lib/python3*/site-packages/torchgen
"""


def available() -> bool:
    return all(shutil.which(tool) for tool in TOOLS)


def image_dir(image: str, docker: str = "/usr/bin/docker") -> Path:
    """The slim image of `image`, converted to a Charliecloud directory (cached by image ID)."""
    image_id = subprocess.run(
        [docker, "image", "inspect", "-f", "{{.Id}}", image],
        capture_output=True, text=True, check=True,
    ).stdout.strip().split(":")[-1][:16]  # fmt: skip
    target = CACHE / image_id
    if (target / "ch" / "environment").exists():
        return target
    CACHE.mkdir(mode=0o755, exist_ok=True)
    os.chmod(CACHE, 0o755)
    for old in CACHE.iterdir():  # earlier images' conversions: 1 GB each
        shutil.rmtree(old, ignore_errors=True)
    slim = f"diskinfo-charliecloud-slim:{image_id}"
    subprocess.run(
        [docker, "build", "--network", "host", "-q", "-t", slim, "-"],
        input=SLIM.format(image=image), text=True, capture_output=True, check=True,
    )  # fmt: skip
    try:
        partial = CACHE / f".{image_id}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            ["ch-convert", "-i", "docker", slim, str(partial)],
            capture_output=True, text=True, check=True, timeout=900,
        )  # fmt: skip
        partial.rename(target)
    finally:
        subprocess.run([docker, "rmi", "-f", slim], capture_output=True)
    return target


@contextlib.contextmanager
def ordinary_user(name: str = "chuser") -> Iterator[tuple[int, int, str]]:
    """(uid, gid, name) of an ordinary account with a home: uid 1000's where it exists, else a
    new one, removed afterwards (Slurm runs a job only as a user it can look up)."""
    with contextlib.suppress(KeyError):
        entry = pwd.getpwuid(1000)
        yield entry.pw_uid, entry.pw_gid, entry.pw_name
        return
    subprocess.run(["useradd", "-m", "-u", "1000", "-U", name], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid, entry.pw_name
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


def as_user(uid: int, gid: int) -> list[str]:
    """The argv prefix that runs a command as that user, as a login would (no root left)."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--reset-env"]
