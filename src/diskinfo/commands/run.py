"""`diskinfo run -- COMMAND...`: the training command beside the monitor, as the calling user.

HPC runtimes (Apptainer, enroot/pyxis, Charliecloud, rootless podman, `docker run --user`)
start the image as the submitting user, often with its root filesystem read-only and its
ENTRYPOINT skipped. This is the way in there, and the image's entrypoint takes it too when it
does not start as root. It runs the very pieces supervisord runs in a root start, with the same
state layout: docker/run/diskinfo-monitor.sh through logged.sh (the monitor, its log written
by log-tee.py) and docker/run/run-train.sh (the command, train.log, its PID file and exit
status), so the verdicts, the JSONL and the closing `[Run]` line are the Docker path's. What
supervisord, supervisord-run.py and train-exit-listener.py do there is done here: start the
monitor first, stop the command's process group on SIGTERM/SIGINT/SIGHUP (SIGKILL after
TRAIN_STOP_TIMEOUT), stop the monitor after the command (it writes `[Run]`), and exit with
the command's status.

What this user cannot have is said in one line each, with the fix, and never stops the
command: a logs folder that cannot be written (the command then runs alone), a HOME that is
unset or read-only (a private one under /tmp stands in), a uid without a passwd entry (USER
is set, so getpass and torch.compile's cache find a name).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from diskinfo.errors import UserError

LOG_DIR_ENV = "DISKINFO_LOG_DIR"  # the verb's setting; LOG_DIR is the image's root start's
MONITOR_STOP_S = 15.0  # the monitor's closing [Run] line, after the command ended
LIB_HELP = (
    "diskinfo run needs the image's scripts: PYTORCH_CUDA_LIB (the image sets it) must name "
    "the folder holding run/ and shared/; run it inside the image (ch-run --set-env, "
    "apptainer run, srun --container-image)"
)


def say(text: str) -> None:
    """One line on stderr, where a runtime's job output keeps it."""
    print(f"diskinfo run: {text}", file=sys.stderr, flush=True)


def default_log_dir(env: dict[str, str], cwd: str) -> str:
    """`./logs`; inside a Slurm step one folder per node (`./logs/NODE`), since every node of
    a job shares the working folder and one monitor per folder is the rule (LogDirLock)."""
    if env.get(LOG_DIR_ENV):
        return env[LOG_DIR_ENV]
    base = os.path.join(cwd, "logs")
    if env.get("SLURM_STEP_ID") is not None:
        node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
        return os.path.join(base, node)
    return base


def writable_dir(path: str) -> str | None:
    """None when `path` is (or is made) a folder this user can write; else why not."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not os.path.isdir(path):
        return "not a folder"
    if not os.access(path, os.W_OK | os.X_OK):
        try:
            st, fs = os.stat(path), os.statvfs(path)
        except OSError as exc:
            return exc.strerror or str(exc)
        if fs.f_flag & os.ST_RDONLY:
            return "Read-only file system"
        return f"not writable by uid {os.getuid()} (it belongs to uid {st.st_uid})"
    return None


def private_dir(parent: str, name: str) -> str | None:
    """`parent/name`, made 0700 and ours; None when it cannot be (a link or someone else's
    folder planted there in a shared /tmp is refused, never used)."""
    path = os.path.join(parent, name)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.getuid():
        return None
    return path


def fix_identity(env: dict[str, str], notes: list[str]) -> None:
    """A uid without a passwd entry (`docker run --user 4242`, some Apptainer setups): Python's
    getpass.getuser(), which torch.compile's cache and others call, fails on it, unless USER or
    LOGNAME names someone."""
    uid = os.getuid()
    try:
        pwd.getpwuid(uid)
        return
    except KeyError:
        pass
    if not (env.get("USER") or env.get("LOGNAME")):
        env["USER"] = env["LOGNAME"] = f"uid{uid}"
    notes.append(
        f"uid {uid} has no entry in the image's /etc/passwd:"
        f" USER={env.get('USER') or env['LOGNAME']} stands in for programs that look a name"
        " up; run with a uid the image knows (--user 1000:100) or bind the host's passwd"
        " entry (Apptainer does) to have your own"
    )


def fix_home(env: dict[str, str], notes: list[str]) -> None:
    """HOME, and with it every cache that lives there by default (pip's ~/.cache/pip, torch's
    ~/.cache/torch, matplotlib's ~/.config/matplotlib, Jupyter's ~/.local/share/jupyter), must
    be writable: a read-only image, or a HOME that does not exist in it, gets one under /tmp."""
    home = env.get("HOME", "")
    if home and home != "/":
        why = writable_dir(home)
        if why is None:
            return
        problem = f"HOME={home} cannot be written ({why})"
    else:
        problem = "HOME is not set" if not home else "HOME is /, which cannot be written"
    stand_in = private_dir(tempfile.gettempdir(), f"pytorch-cuda-home-{os.getuid()}")
    if stand_in is None:
        notes.append(
            f"{problem}, and no private folder could be made in {tempfile.gettempdir()}: caches"
            " (pip, torch, matplotlib) will fail; set HOME to a folder you can write, or bind"
            " one (docker -v, apptainer --bind, ch-run --home)"
        )
        return
    env["HOME"] = stand_in
    notes.append(
        f"{problem}: HOME and the caches under it (pip, torch, matplotlib, Jupyter) are"
        f" {stand_in} for this run and go with {tempfile.gettempdir()}; set HOME to a folder"
        " you can write, or bind one (docker -v DIR:/home/NAME, ch-run --home, Apptainer"
        " binds it by default)"
    )


def state_dir() -> str | None:
    """A private folder for the run's state (PID file, exit status, loader figures), where
    every runtime has one: XDG_RUNTIME_DIR, else TMPDIR or /tmp."""
    for parent in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir()):
        if not parent:
            continue
        with contextlib.suppress(OSError):
            return tempfile.mkdtemp(prefix="pytorch-cuda-run.", dir=parent)
    return None


def watch_paths(env: dict[str, str], lib: Path, cwd: str, state: str) -> list[str]:
    """DISKINFO_PATHS as the root start splits it (settings.py), then the working folder:
    under an HPC runtime the user's data is there, not in the image's /workspace."""
    # the account settings are the root start's (it makes NB_USER): here the caller is the user
    checked = {k: v for k, v in env.items() if k not in ("NB_USER", "NB_UID", "NB_GID")}
    out = subprocess.run(
        [sys.executable, "-I", str(lib / "start" / "settings.py"), "--paths-file",
         os.path.join(state, "diskinfo-paths")],
        env=checked, capture_output=True, timeout=60,
    )  # fmt: skip
    if out.returncode != 0:
        raise UserError(out.stderr.decode(errors="replace").strip() or "settings check failed")
    for record in out.stdout.split(b"\0"):
        name, eq, value = record.decode(errors="surrogateescape").partition("=")
        if eq:
            env[name] = value
    try:
        listed = Path(state, "diskinfo-paths").read_bytes().split(b"\0")
    except OSError:
        listed = []
    paths = [p.decode(errors="surrogateescape") for p in listed if p]
    paths = [p for p in paths if os.path.exists(p)]
    if cwd not in paths:
        paths.append(cwd)
    return paths


def banner(lib: Path, env: dict[str, str], notes: list[str], log_dir: str | None) -> None:
    """The start banner's lines that hold without services, then the notes, to the console and
    to startup.log."""
    out = subprocess.run(
        [sys.executable, "-I", str(lib / "start" / "run_banner.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    lines = (
        out.stdout.splitlines()
        if out.returncode == 0
        else [f"WARNING start banner failed: {out.stderr.strip()}"]
    )
    lines += [f"diskinfo run: {note}" for note in notes]
    print("\n".join(lines), file=sys.stderr, flush=True)
    if log_dir is not None:
        with contextlib.suppress(OSError), open(os.path.join(log_dir, "startup.log"), "a") as f:
            f.write("\n".join(lines) + "\n")


class Run:
    """The monitor and the command, each in its own process group (a terminal's Ctrl-C reaches
    them through us, in the Docker path's order: the command first, the monitor after)."""

    def __init__(self, lib: Path, env: dict[str, str], state: str) -> None:
        self.lib, self.env, self.state = lib, env, state
        self.monitor: subprocess.Popen[bytes] | None = None
        self.train: subprocess.Popen[bytes] | None = None
        self.copier: threading.Thread | None = None
        self.stopping = False
        self.kill_timer: threading.Timer | None = None
        self.monitor_stopped = False

    def start_monitor(self) -> None:
        run = self.lib / "run"
        self.monitor = subprocess.Popen(
            [str(run / "logged.sh"), "diskinfo-monitor", str(run / "diskinfo-monitor.sh")],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        # its console lines (verdicts, [Run]) through us: we know when the last one is out
        self.copier = threading.Thread(target=self._copy, args=(self.monitor.stdout,), daemon=True)
        self.copier.start()

    @staticmethod
    def _copy(pipe) -> None:  # type: ignore[no-untyped-def]
        out = sys.stdout.buffer
        while chunk := pipe.read1(65536):
            with contextlib.suppress(OSError, ValueError):
                out.write(chunk)
                out.flush()

    def start_train(self) -> None:
        self.train = subprocess.Popen(
            [str(self.lib / "run" / "run-train.sh")],
            env=self.env, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def on_signal(self, signum: int, _frame: object) -> None:
        """supervisord's stop of `train`: the signal to its whole group, SIGKILL after
        TRAIN_STOP_TIMEOUT."""
        if self.train is None or self.train.poll() is not None:
            return
        if not self.stopping:
            self.stopping = True
            say(f"{signal.Signals(signum).name}: stopping the command")
            timeout = float(self.env.get("TRAIN_STOP_TIMEOUT") or 5)
            self.kill_timer = threading.Timer(timeout, self._kill)
            self.kill_timer.daemon = True
            self.kill_timer.start()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.train.pid, signum)

    def _kill(self) -> None:
        if self.train is not None and self.train.poll() is None:
            say("the command did not stop within TRAIN_STOP_TIMEOUT; SIGKILL")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.train.pid, signal.SIGKILL)

    def wait(self) -> int:
        assert self.train is not None
        status = self.train.wait()
        if self.kill_timer is not None:
            self.kill_timer.cancel()
        self.stop_monitor()
        try:
            return int(Path(self.state, "train", "exit").read_text().strip())
        except (OSError, ValueError):
            return 128 - status if status < 0 else status

    def stop_monitor(self) -> None:
        if self.monitor is None or self.monitor_stopped:
            return
        self.monitor_stopped = True
        if (status := self.monitor.poll()) is not None:
            if status != 0:
                say(
                    f"the monitor ended early (exit status {status}): its reason is above and in"
                    f" {self.env['LOG_DIR']}/diskinfo-monitor.log; the command ran unwatched"
                )
        else:
            with contextlib.suppress(ProcessLookupError):
                self.monitor.send_signal(signal.SIGTERM)
            try:
                self.monitor.wait(MONITOR_STOP_S)
            except subprocess.TimeoutExpired:
                say(f"the monitor did not stop within {MONITOR_STOP_S:g} s; SIGKILL")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.monitor.pid, signal.SIGKILL)
                self.monitor.wait()
        if self.copier is not None:
            self.copier.join(5)  # the log tee ends with the monitor's output


def run(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UserError("needs a command after --, e.g. diskinfo run -- python train.py")
    lib_env = os.environ.get("PYTORCH_CUDA_LIB", "")
    lib = Path(lib_env)
    if not lib_env or not (lib / "run" / "run-train.sh").is_file():
        raise UserError(LIB_HELP)
    env = dict(os.environ)
    cwd = os.getcwd()
    notes: list[str] = []
    fix_identity(env, notes)
    fix_home(env, notes)
    log_dir = os.path.abspath(args.log_dir or default_log_dir(env, cwd))
    local = env.get("SLURM_LOCALID", "0")
    why = writable_dir(log_dir) if local == "0" else None
    state = state_dir() if why is None and local == "0" else None
    if why is not None or state is None:
        if local != "0":
            # one monitor a node (it watches the node's devices; a second one in the same
            # folder is refused): local task 0's
            say(f"Slurm local task {local}: the monitor of local task 0 watches this node")
        elif why is not None:
            say(
                f"the logs folder {log_dir} cannot be used ({why}): the command runs without the"
                f" monitor; pass --log-dir DIR or set {LOG_DIR_ENV} to a folder you can write,"
                " or bind one there (docker -v, apptainer --bind, ch-run -b)"
            )
        else:
            say(
                f"no private folder for the run's state in {tempfile.gettempdir()} (read-only?):"
                " the command runs without the monitor; set TMPDIR to a folder you can write,"
                " or mount one (docker --tmpfs /tmp; Apptainer and Charliecloud bind /tmp)"
            )
        for note in notes:
            say(note)
        sys.stdout.flush()
        try:
            os.execvpe(command[0], command, env)
        except OSError as exc:
            raise UserError(f"cannot run {command[0]}: {exc.strerror or exc}", 127) from None
    assert state is not None
    try:
        return _run(lib, env, state, log_dir, command, notes)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def _run(
    lib: Path, env: dict[str, str], state: str, log_dir: str, command: list[str], notes: list[str]
) -> int:
    env.update(LOG_DIR=log_dir, STARTUP_STATE_DIR=state, TRAIN_ENABLE="1")
    # the loader figures (diskinfo.torch) and the monitor meet here: the image's /run/diskinfo
    # is root's
    if writable_dir(env.get("DISKINFO_STATE_DIR", "")) is not None:
        env["DISKINFO_STATE_DIR"] = os.path.join(state, "diskinfo")
        os.mkdir(env["DISKINFO_STATE_DIR"], 0o700)
    paths = watch_paths(env, lib, os.getcwd(), state)
    Path(state, "diskinfo-paths").write_bytes(b"".join(p.encode() + b"\0" for p in paths))
    Path(state, "train").mkdir(mode=0o755)
    Path(state, "train.pid").touch()
    Path(state, "train.args").write_bytes(b"".join(os.fsencode(word) + b"\0" for word in command))
    banner(lib, env, notes, log_dir)
    job = Run(lib, env, state)
    handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    before = {signum: signal.signal(signum, job.on_signal) for signum in handled}
    try:
        job.start_monitor()
        job.start_train()
        return job.wait()
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        job.stop_monitor()
