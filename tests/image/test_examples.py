"""The examples ship in the image and run there, as a user in Jupyter's terminal would run them:
make a small ImageFolder tree, pack it, train one epoch from the shards with each reader."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.image

SCRIPT = r"""
set -euo pipefail
cd /tmp
python3 - <<'PY'
import os, random
random.seed(0)
for c in range(3):
    os.makedirs(f"train/class{c}", exist_ok=True)
    for i in range(40):
        with open(f"train/class{c}/{i:04d}.bin", "wb") as f:
            f.write(random.randbytes(2048))
PY
diskinfo pack train shards --readers 2 >/dev/null
python3 /workspace/examples/train_shards.py shards --workers 2 --classes 3 --batch-size 16
python3 /workspace/examples/train_shards.py shards --reader webdataset --workers 2 --classes 3 \
  --batch-size 16
"""


def test_the_shards_example_trains_in_the_image(docker_client: Any, image: str) -> None:
    out = docker_client.containers.run(
        image,
        ["bash", "-c", SCRIPT],
        entrypoint=[],
        network_mode="host",
        shm_size="256m",
        user="jovyan",
        remove=True,
        stdout=True,
        stderr=True,
    ).decode()
    epochs = re.findall(r"epoch 0: (\d+) samples", out)
    assert epochs == ["120", "120"], out[-3000:]  # both readers: every sample once
