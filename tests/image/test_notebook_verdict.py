"""A notebook user's session: a training cell in a Jupyter kernel, the verdict below it.

The image starts with Jupyter on and no training command. A notebook whose cell trains with a
wrapped DataLoader (the CPU work in the kernel's own process, num_workers=0) runs in a kernel
of the image's own Python kernel spec (nbclient, as `jupyter nbconvert --execute`), started
from `docker exec`: no child of anything the monitor supervises. What the user sees:

- below the cell, the held verdict, the data-wait share, the CPU of the training process and
  the first fix, rendered by a real browser (headless Chromium; the screenshot is kept in
  build/test-output/test_notebook_verdict/);
- a CPU figure that counts the kernel's process: the monitor's records name the kernel's PID
  as the main process, with the cores it used (it read 0.0 cores when only the supervised
  command's tree was watched).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers import tools

pytestmark = pytest.mark.image

CELLS = [
    "import os, time, torch\n"
    "from torch.utils.data import DataLoader, Dataset\n"
    "import diskinfo.torch\n"
    "print('kernel pid', os.getpid())",
    # the decode of every sample in the loop's own process: input-bound on the CPU
    "class Decoded(Dataset):\n"
    "    def __len__(self):\n"
    "        return 10**6\n"
    "    def __getitem__(self, i):\n"
    "        sum(j * j for j in range(20000))\n"
    "        return torch.zeros(8)\n"
    "loader = diskinfo.torch.watch(DataLoader(Decoded(), batch_size=4, num_workers=0))\n"
    "deadline = time.time() + 30\n"
    "for batch in loader:\n"
    "    (batch * 2).sum()\n"
    "    if time.time() > deadline:\n"
    "        break\n"
    "time.sleep(4)  # the monitor's verdict on the last intervals arrives below the cell",
]


def _notebook() -> str:
    cells = [
        {"cell_type": "code", "metadata": {}, "source": src, "outputs": [], "execution_count": None}
        for src in CELLS
    ]
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    return json.dumps({"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5})


def _outputs(nb: dict) -> list[dict]:
    return [o for cell in nb["cells"] for o in cell.get("outputs", [])]


def _text(value: str | list[str]) -> str:
    """A notebook file keeps multi-line text as a list of lines."""
    return value if isinstance(value, str) else "".join(value)


def test_a_training_cell_shows_the_verdict_and_counts_the_kernels_cpu(
    container, tmp_path, wait_until
):
    work = tmp_path / "work"
    logs = tmp_path / "logs"
    for d in (work, logs):
        d.mkdir()
        os.chmod(d, 0o777)  # the monitor and the kernel run as the unprivileged user
    (work / "train.ipynb").write_text(_notebook())
    os.chmod(work / "train.ipynb", 0o666)
    running = container(
        env={"JUPYTER_ENABLE": "1", "DISKINFO_INTERVAL": "1"},
        volumes={
            str(logs): {"bind": "/workspace/logs", "mode": "rw"},
            str(work): {"bind": "/workspace/work", "mode": "rw"},
        },
    )
    running.wait_for_program("diskinfo")
    code, out = running.exec(
        "cd /workspace/work && jupyter nbconvert --to notebook --execute --inplace "
        "--ExecutePreprocessor.timeout=240 train.ipynb && "
        "jupyter nbconvert --to html train.ipynb",
        user=os.environ.get("NB_USER", "jovyan"),
        timeout=300,
    )
    assert code == 0, out[-3000:]
    nb = json.loads((work / "train.ipynb").read_text())
    printed = "".join(_text(o.get("text", "")) for o in _outputs(nb))
    kernel_pid = int(printed.split("kernel pid")[1].split()[0])
    shown = [o for o in _outputs(nb) if "text/html" in o.get("data", {})]
    assert len(shown) == 1, _outputs(nb)  # one display, updated in place
    text = _text(shown[0]["data"]["text/plain"])
    print(text)
    assert "diskinfo verdict: input-bound: cpu" in text, text
    assert "diskinfo data-wait now: " in text and "% of step time" in text, text
    assert "diskinfo try: " in text, text
    cores = float(text.split("cpu: training process ")[1].split()[0])
    waiting = text.split(" more waiting for a core")[0].split()[-1] if "waiting" in text else "0"
    # the kernel's own decode, not 0.0: used, or wanted while the host's other work ran
    assert cores > 0 and cores + float(waiting) >= 0.5, text

    records = [json.loads(line) for line in (logs / "diskinfo.jsonl").read_text().splitlines()]
    kernel = [p for r in records for p in r["procs"] if p["pid"] == kernel_pid]
    assert kernel and {p["role"] for p in kernel} == {"main"}, records[-1]["procs"]
    assert max(p["cpu_percent"] + p["cpu_wait_percent"] for p in kernel) > 50, kernel

    chromium = tools.find("chromium", "chromium-browser")
    page = work / "train.html"
    # the screenshot outlives the test, where CI keeps its artifacts
    shot = tools.artifact_dir("test_notebook_verdict") / "notebook.png"
    shot.unlink(missing_ok=True)
    browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"]
    dom = subprocess.run(
        [*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    subprocess.run([*browser, f"--screenshot={shot}", page.as_uri()], timeout=120, check=False)
    assert "diskinfo-verdict" in dom and "input-bound: cpu" in dom, dom[-2000:]
    # beside the cell: the verdict comes after the training cell's code in the page
    assert dom.index("arrives below the cell") < dom.index("diskinfo-verdict")
    assert shot.exists() and shot.stat().st_size > 10_000
