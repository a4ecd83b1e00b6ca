"""The start banner: what this container is running on, in the first lines of `docker logs`.

Users lose hours to a wrong driver, a forgotten `--gpus all`, a 64 MB /dev/shm or a token they
cannot find; the banner answers those before anything else starts, with a Jupyter URL and an
ssh command to copy. Versions come from package metadata and NVML, not from importing torch, so
the banner costs milliseconds at every start.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import platform
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from diskinfo.analyse.baseline import default_path  # the image's venv: root's python3
from diskinfo.logfiles import LOG_DIR
from diskinfo.sources import shm
from diskinfo.thresholds import shm_small

if __name__ == "__main__":  # root runs it as `python3 -I`, which leaves the working and the
    # script's own directory off sys.path: scripts/validate_cuda comes from the root-owned
    # PYTORCH_CUDA_LIB, which holds it as the checkout's root does (where the tests import it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts.validate_cuda import drivers

if __name__ == "__main__":  # and its neighbour in start/ by bare name, as settings.py does
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from places import host_network, persist_line, unwritable_mounts, workspace_mounts

version_tuple = drivers.version_tuple

# What the banner reads from the container's environment that the Dockerfile sets as ENV, the
# one place that gives them their defaults (run outside the image, the banner names the missing)
IMAGE_ENV = ("IMAGE_CUDA", "LOG_DIR", "NB_USER", "JUPYTER_ENABLE", "JUPYTER_PORT", "SSH_PORT",
             "METRICS_PORT")  # fmt: skip
NO_GPU = "no GPU visible: did you pass --gpus all?"


@dataclass
class Gpu:
    index: int
    name: str
    memory_mb: int


@dataclass
class Service:
    name: str
    where: str  # "http://0.0.0.0:8888", "port 22", ...


@dataclass
class Facts:
    """Everything the banner says, gathered once; rendering is a pure function of it."""

    image_version: str = "unknown"
    image_cuda: str = ""  # IMAGE_CUDA (11.8, or 12.8): the driver minimum is this CUDA's
    python: str = ""
    torch: str | None = None
    cuda: str | None = None  # CUDA version torch was built for; None for a CPU build
    cudnn: str | None = None
    nccl: str | None = None
    driver: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    gpu_error: str = ""
    shm_mb: int | None = None
    shm_small: bool = False  # under SHM_MIN_MB (diskinfo.thresholds.shm_small)
    services: list[Service] = field(default_factory=list)
    token_hint: str = ""
    logs_dir: str = LOG_DIR
    jupyter_url: str = ""  # http://127.0.0.1:PORT/lab?token=...; "" when Jupyter is off
    ssh_command: str = ""  # ssh -p PORT user@HOST; "" when sshd is off
    ssh_port: str = "22"  # the container's, which the host port is published for
    # the host's network (--network host): the container's ports are the host's, and its
    # name the host's, so the ssh line can give both; False where that is not known
    host_network: bool = False
    ssh_off_reason: str = ""
    metrics_url: str = ""
    # why a service is off although it was wanted: its port is taken (70-ports.sh)
    port_taken: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None  # the baseline file when it exists, else None
    baseline_path: str = ""
    bench_path: str = "/workspace/data"
    # `docker exec -u NB_USER`: as root, a command would run in a folder that user writes
    nb_user: str = "jovyan"
    # mount points at or under /workspace (None: not known): what outlives the container
    workspace_mounts: list[str] | None = None
    # (mount point, its owner's uid) of read-write mounts NB_USER cannot write: a root user's
    # project folder on the host, where Jupyter's saves fail with 403
    unwritable: list[tuple[str, int]] = field(default_factory=list)
    nb_uid: str = "1000"


def driver_warning(driver: str | None, cuda: str) -> str | None:
    """A plain warning when the host driver is older than the image's CUDA needs, else None."""
    if not driver or not version_tuple(driver):
        return None
    needed, compat = drivers.min_drivers(cuda)
    if version_tuple(driver) >= version_tuple(needed):
        return None
    major = cuda.split(".")[0]
    return (
        f"WARNING: NVIDIA driver {driver} is older than {needed}, the minimum for CUDA {cuda}:"
        f" update the host's driver (minor-version compatibility runs only some CUDA {major}.x"
        f" code, from {compat})."
    )


def render(facts: Facts) -> list[str]:
    """The banner's lines."""
    torch = facts.torch or "not installed"
    cuda = f"CUDA {facts.cuda}" if facts.cuda else "CPU build, no CUDA"
    lines = [
        f"==== pytorch-cuda-diskinfo {facts.image_version} ====",
        f"Python     {facts.python}",
        f"torch      {torch} ({cuda})",
        f"CUDA       {facts.cuda or '-'}   cuDNN {facts.cudnn or '-'}   NCCL {facts.nccl or '-'}",
    ]
    if facts.gpus:
        for gpu in facts.gpus:
            lines.append(
                f"GPU {gpu.index}      {gpu.name}, {gpu.memory_mb} MiB, driver {facts.driver}"
            )
    else:
        detail = f" ({facts.gpu_error})" if facts.gpu_error else ""
        lines.append(f"GPUs       {NO_GPU}{detail}")
    warning = driver_warning(facts.driver, facts.image_cuda)
    if warning:
        lines.append(warning)
    if facts.shm_mb is None:
        lines.append("/dev/shm   not mounted")
    elif facts.shm_small:
        lines.append(f"/dev/shm   {facts.shm_mb} MB: too small for DataLoader workers, see above")
    else:
        lines.append(f"/dev/shm   {facts.shm_mb} MB")
    services = ", ".join(f"{s.name} ({s.where})" for s in facts.services) or "none"
    lines.append(f"Services   {services}")
    lines += access_lines(facts)
    if facts.token_hint:
        lines.append(f"Token      {facts.token_hint}")
    lines.append(
        "Verdicts   in docker logs when they change, and a summary every few minutes;"
        f" every figure in {facts.logs_dir}/diskinfo.log"
    )
    if facts.baseline is None and facts.baseline_path:
        lines.append(
            f"Baseline   none for this disk yet: measure it once with"
            f" `docker exec -u {facts.nb_user} CONTAINER diskinfo bench {facts.bench_path}`"
            f" (kept in {facts.baseline_path}; verdicts then compare reads with it)"
        )
    lines.append(
        f"Logs       {facts.logs_dir}/: startup.log, supervisord.log, one <program>.log each"
    )
    persists = persist_line(facts.workspace_mounts)
    if persists:
        lines.append(persists)
    for point, owner in facts.unwritable:
        lines.append(
            f"Saving     {facts.nb_user} (uid {facts.nb_uid}) cannot write {point}, uid {owner}'s"
            f" on the host: start the container with -e CHOWN_EXTRA={point} to hand it to"
            f" {facts.nb_user} (root on the host), or as your own account with -e NB_UID=$(id -u)"
            " -e NB_GID=$(id -g)"
        )
    return lines


def access_lines(facts: Facts) -> list[str]:
    """How to reach the services from the host, and the port caveat, said once."""
    lines = []
    if facts.jupyter_url:
        lines.append(f"Jupyter    {facts.jupyter_url}")
    elif "jupyter" in facts.port_taken:
        lines.append(f"Jupyter    off: {facts.port_taken['jupyter']}")
    if facts.ssh_command:
        lines.append(f"SSH        {facts.ssh_command}")
    elif facts.ssh_off_reason:
        lines.append(f"SSH        off: {facts.ssh_off_reason}")
    if facts.metrics_url:
        lines.append(f"Metrics    {facts.metrics_url}")
    elif "metrics" in facts.port_taken:
        lines.append(f"Metrics    off: {facts.port_taken['metrics']}")
    if facts.host_network and (facts.jupyter_url or facts.ssh_command or facts.metrics_url):
        lines.append(
            "Ports      are the host's (this container shares the host's network); HOST: the"
            " host's name or address"
        )
    elif facts.jupyter_url or facts.ssh_command or facts.metrics_url:
        lines.append(
            "Ports      are the container's: use the host ports you published with -p"
            f" (PORT: the one for {facts.ssh_port}, e.g. 2222 in -p 2222:{facts.ssh_port};"
            f" with --network host, {facts.ssh_port} itself); HOST: the docker host's name"
        )
    return lines


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _torch_cuda() -> str | None:
    """torch.version.cuda, read from torch/version.py without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets):
                try:
                    value = ast.literal_eval(node.value) if node.value else None
                except ValueError:
                    return None
                return value if isinstance(value, str) else None
    return None


def _gpus(facts: Facts) -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no library, no device nodes, no driver: all mean "no GPU"
        facts.gpu_error = str(exc) or type(exc).__name__
        return
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        facts.driver = driver.decode() if isinstance(driver, bytes) else driver
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20
            name = name.decode() if isinstance(name, bytes) else name
            facts.gpus.append(Gpu(index, name, int(memory)))
    finally:
        pynvml.nvmlShutdown()


def _services(env: dict[str, str]) -> list[Service]:
    """What entrypoint.sh decided to start, from the flags its init.d steps exported."""
    services = []
    if env["JUPYTER_ENABLE"] != "0":
        services.append(Service("jupyter", f"port {env['JUPYTER_PORT']}"))
    if env.get("SSHD_ENABLE", "1") != "0":
        services.append(Service("sshd", f"port {env['SSH_PORT']}"))
    metrics = env["METRICS_PORT"]
    services.append(
        Service("diskinfo", f"metrics on port {metrics}" if metrics != "0" else "no metrics")
    )
    if env.get("TRAIN_ENABLE", "1") != "0":
        services.append(Service("train", "your command"))
    return services


def _token_hint(env: dict[str, str], logs_dir: str) -> str:
    """Where the token comes from; never the user's own token."""
    if env["JUPYTER_ENABLE"] == "0":
        return ""
    if env.get("JUPYTER_TOKEN_FILE"):
        return f"Jupyter token: in {env['JUPYTER_TOKEN_FILE']} (JUPYTER_TOKEN_FILE)"
    if env.get("JUPYTER_TOKEN"):
        return "Jupyter token: the JUPYTER_TOKEN you passed with -e"
    return f"Jupyter token: random, in the URL above and printed once in {logs_dir}/jupyter.log"


def jupyter_url(env: dict[str, str], random_token: str | None) -> str:
    """An openable URL: with the token when it is this container's random one (which the
    user cannot know otherwise), with a placeholder for the user's own."""
    if env["JUPYTER_ENABLE"] == "0":
        return ""
    base = f"http://127.0.0.1:{env['JUPYTER_PORT']}/lab"
    if env.get("JUPYTER_TOKEN_FILE") or env.get("JUPYTER_TOKEN") or not random_token:
        return f"{base}?token=YOUR_TOKEN"
    return f"{base}?token={random_token}"


def _random_token(env: dict[str, str]) -> str | None:
    """The random token 40-jupyter.sh wrote (the banner runs as root, after it)."""
    if env.get("JUPYTER_TOKEN_FILE") or env.get("JUPYTER_TOKEN"):
        return None
    state = env.get("STARTUP_STATE_DIR")  # set by the image's ENV
    if not state:
        return None
    try:
        return (Path(state) / "jupyter-token").read_text().strip() or None
    except OSError:
        return None


def _ports_taken(env: dict[str, str]) -> dict[str, str]:
    """The services 70-ports.sh left off because their port is taken, with its reason."""
    state = env.get("STARTUP_STATE_DIR")
    try:
        text = (Path(state) / "ports-taken").read_text() if state else ""
    except OSError:
        return {}
    return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)


def baseline_path(env: dict[str, str], logs_dir: str) -> str:
    """Where `diskinfo bench` keeps the device baseline in the image: the store's own rule."""
    return str(default_path({**env, "LOG_DIR": logs_dir}))


def _existing(path: str) -> str | None:
    try:
        return path if Path(path).stat().st_size > 0 else None
    except OSError:
        return None


def _python(env: dict[str, str]) -> str:
    """The interpreter, and where the user's programs run it from: NB_USER's own environment
    (docker/build/user-venv), where `pip install` works, when the image has one."""
    user = env.get("USER_VENV", "")  # as another uid, or read-only: not one to add to
    if not (user and os.access(f"{user}/bin/python", os.X_OK) and os.access(user, os.W_OK)):
        return f"{platform.python_version()} ({sys.executable})"
    return (
        f"{platform.python_version()}: your programs run {user}/bin/python, where"
        f" `pip install` adds packages for this container, over the image's {sys.prefix}"
    )


def gather(env: dict[str, str], net_devices: list[str] | None = None) -> Facts:
    """Read the facts from this container: package metadata, NVML, /dev/shm, the environment
    (`net_devices`: this namespace's network devices; None: read /sys/class/net)."""
    logs_dir = env["LOG_DIR"]
    shm_mb = shm.size_mb()
    facts = Facts(
        image_version=env.get("IMAGE_VERSION") or _dist_version("diskinfo") or "unknown",
        image_cuda=env["IMAGE_CUDA"],
        python=_python(env),
        torch=_dist_version("torch"),
        cuda=_torch_cuda(),
        cudnn=_dist_version("nvidia-cudnn-cu11", "nvidia-cudnn-cu12"),
        nccl=_dist_version("nvidia-nccl-cu11", "nvidia-nccl-cu12"),
        shm_mb=None if shm_mb is None else int(shm_mb),
        shm_small=shm_mb is not None and shm_small(shm_mb, env),
        services=_services(env),
        token_hint=_token_hint(env, logs_dir),
        logs_dir=logs_dir,
        jupyter_url=jupyter_url(env, _random_token(env)),
        metrics_url=(
            f"http://127.0.0.1:{env['METRICS_PORT']}/metrics"
            if env["METRICS_PORT"] not in ("", "0")
            else ""
        ),
        baseline_path=baseline_path(env, logs_dir),
        port_taken=_ports_taken(env),
        ssh_port=env["SSH_PORT"],
        nb_user=env["NB_USER"],
    )
    facts.baseline = _existing(facts.baseline_path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            mounts = f.read()
        facts.workspace_mounts = workspace_mounts(mounts)
        if env.get("NB_UID") and env.get("NB_GID"):  # the start-up's, checked numbers
            facts.nb_uid = env["NB_UID"]
            facts.unwritable = unwritable_mounts(
                mounts, facts.nb_user, env["NB_UID"], env["NB_GID"]
            )
    except (OSError, ValueError):
        facts.workspace_mounts = None
    facts.host_network = host_network(net_devices)
    if env.get("SSHD_ENABLE", "1") != "0":
        where = (env["SSH_PORT"], socket.gethostname()) if facts.host_network else ("PORT", "HOST")
        facts.ssh_command = f"ssh -p {where[0]} {env['NB_USER']}@{where[1]}"
    else:
        facts.ssh_off_reason = facts.port_taken.get(
            "sshd", 'no public key: pass -e PUBLIC_KEY="$(cat ~/.ssh/id_*.pub)"'
        )
    _gpus(facts)
    return facts


def main() -> int:
    if missing := ", ".join(name for name in IMAGE_ENV if name not in os.environ):
        sys.exit(f"banner: {missing} not set: the image sets them (Dockerfile ENV)")
    print("\n".join(render(gather(dict(os.environ)))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
