"""The start banner's wording: driver check, missing GPU, /dev/shm, token hint (pure parts)."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import ROOT
from tests.helpers.scripts import load

load("start/places.py")  # banner.py imports its neighbour by bare name
banner = load("start/banner.py")
# what the banner reads that the Dockerfile sets as ENV: outside the image, set here
ENV = {"IMAGE_CUDA": "11.8", "LOG_DIR": "/workspace/logs", "NB_USER": "jovyan"}
ENV |= {"JUPYTER_ENABLE": "1", "JUPYTER_PORT": "8888", "SSH_PORT": "22", "METRICS_PORT": "9101"}


def _facts(**kw):
    base = dict(image_version="1.0", python="3.11.2", torch="2.7.1+cu118", cuda="11.8")
    base |= dict(image_cuda="11.8")
    base.update(kw)
    return banner.Facts(**base)


def test_old_driver_gets_a_plain_warning_naming_the_minimum():
    lines = banner.render(_facts(driver="470.82.01", gpus=[banner.Gpu(0, "Tesla T4", 15360)]))
    warning = [line for line in lines if line.startswith("WARNING")]
    assert len(warning) == 1
    assert "470.82.01" in warning[0] and "520.61.05" in warning[0]


def test_current_driver_and_gpus_are_listed_without_warning():
    gpus = [banner.Gpu(0, "NVIDIA H200", 143771), banner.Gpu(1, "NVIDIA H200", 143771)]
    lines = banner.render(_facts(driver="570.86.15", gpus=gpus))
    assert not [line for line in lines if "WARNING" in line]
    assert sum("NVIDIA H200" in line and "570.86.15" in line for line in lines) == 2


def test_no_gpu_asks_about_gpus_all():
    text = "\n".join(banner.render(_facts()))
    assert "no GPU visible: did you pass --gpus all?" in text


def test_small_shm_is_flagged_large_is_not():
    small = "\n".join(banner.render(_facts(shm_mb=64, shm_small=True)))
    large = "\n".join(banner.render(_facts(shm_mb=16384)))
    assert "64 MB: too small" in small
    assert "too small" not in large and "16384 MB" in large


def test_the_banner_holds_shm_to_shm_min_mb_like_the_verdict():
    size = banner.shm.size_mb()  # this machine's /dev/shm, measured where the monitor does
    assert size is not None and banner.gather(ENV).shm_mb == int(size)
    assert banner.gather({**ENV, "SHM_MIN_MB": str(int(size) + 1)}).shm_small
    assert not banner.gather({**ENV, "SHM_MIN_MB": "0"}).shm_small  # 0: never warn


def test_token_hint_never_shows_the_token():
    env = {**ENV, "JUPYTER_TOKEN": "s3cret-value"}
    hint = banner._token_hint(env, "/workspace/logs")
    assert "s3cret-value" not in hint and "JUPYTER_TOKEN" in hint
    assert "/run/t" in banner._token_hint({**ENV, "JUPYTER_TOKEN_FILE": "/run/t"}, "/l")
    assert "/l/jupyter.log" in banner._token_hint(ENV, "/l")


@given(st.lists(st.integers(0, 999), min_size=1, max_size=4))
def test_driver_warning_agrees_with_numeric_order(parts):
    version = ".".join(str(p) for p in parts)
    warned = banner.driver_warning(version, "11.8") is not None
    assert warned == (tuple(parts) < (520, 61, 5))


def test_the_cuda_12_8_image_judges_drivers_by_its_own_minimum():
    """A 12.8 image (Blackwell GPUs) on a 550 driver cannot run: 11.8's 520 floor would pass it."""
    assert banner.driver_warning("550.54.15", cuda="11.8") is None
    warning = banner.driver_warning("550.54.15", cuda="12.8")
    assert warning and "570.26, the minimum for CUDA 12.8" in warning
    assert "CUDA 12.x code, from 525.60.13" in warning
    assert banner.driver_warning("570.86.10", cuda="12.8") is None


def test_the_image_passes_its_cuda_to_the_banner():
    text = (ROOT / "Dockerfile").read_text()
    assert "IMAGE_CUDA=${CUDA}" in text


@given(st.text(max_size=20))
def test_driver_warning_never_raises(text):
    banner.driver_warning(text, "11.8")


class _FakeNvml:
    """Just the NVML calls the banner makes, answering like nvidia-ml-py does."""

    def __init__(self, driver: str, gpus: list[tuple[str, int]], fail: bool = False) -> None:
        self.driver, self.gpus, self.fail, self.shut = driver, gpus, fail, False

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shut = True

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return self.gpus[handle][0].encode()  # older bindings return bytes

    def nvmlDeviceGetMemoryInfo(self, handle):
        return type("Memory", (), {"total": self.gpus[handle][1] * 2**20})()


def test_gpus_and_driver_come_from_nvml(monkeypatch):
    fake = _FakeNvml("515.65.01", [("NVIDIA A100-SXM4-80GB", 81920)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    facts = banner.Facts()
    banner._gpus(facts)
    assert fake.shut
    assert facts.driver == "515.65.01"
    assert facts.gpus == [banner.Gpu(0, "NVIDIA A100-SXM4-80GB", 81920)]
    text = "\n".join(banner.render(facts))
    assert "GPU 0      NVIDIA A100-SXM4-80GB, 81920 MiB, driver 515.65.01" in text
    assert "WARNING: NVIDIA driver 515.65.01 is older than 520.61.05" in text


def test_nvml_missing_means_no_gpu_visible(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml("", [], fail=True))
    facts = banner.Facts()
    banner._gpus(facts)
    assert not facts.gpus and facts.driver is None
    assert "no GPU visible: did you pass --gpus all?" in "\n".join(banner.render(facts))


def test_the_banner_says_where_work_persists():
    """A notebook saved in /workspace itself (no mount) went with `docker run --rm`, and
    nothing said so: the banner names the mounted folders, or says that none is."""
    info = (
        "36 35 98:0 / / rw - overlay overlay rw\n"
        "37 36 8:1 /home/u/p /workspace/code rw - ext4 /dev/sda1 rw\n"
        "38 36 8:1 /home/u/p/logs /workspace/logs rw - ext4 /dev/sda1 rw\n"
        "39 36 8:1 /x /workspace/my\\040data rw - ext4 /dev/sda1 rw\n"
        "40 36 8:1 /y /workspacex rw - ext4 /dev/sda1 rw\n"
    )
    mounts = banner.workspace_mounts(info)
    assert mounts == ["/workspace/code", "/workspace/logs", "/workspace/my data"]
    line = [x for x in banner.render(_facts(workspace_mounts=mounts)) if x.startswith("Persists")]
    assert line == [
        "Persists   only /workspace/code, /workspace/logs, /workspace/my data (mounted from the "
        "host): save notebooks there; the rest of /workspace goes with the container"
    ]
    nothing = banner.render(_facts(workspace_mounts=[]))
    assert any(x.startswith("Persists   nothing under /workspace is mounted") for x in nothing)
    # /workspace mounted whole, or nothing known: no line
    for known in (["/workspace", "/workspace/logs"], None):
        assert not [x for x in banner.render(_facts(workspace_mounts=known)) if "Persists" in x]
