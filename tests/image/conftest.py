"""Fixtures for testing the built image in real containers (after jupyter/docker-stacks' tests).

Every container runs with --network host (no bridge on our machines), so every container gets
its own free JUPYTER_PORT, SSH_PORT and METRICS_PORT. Reusable pieces, by name:

- `docker_client`: the engine; skips when unreachable, fails when CI=true.
- `image`: the image under test (env IMAGE, which the Makefile sets from TEST_IMAGE).
- `net.free_port()`: a TCP port free on 127.0.0.1.
- `container` (factory): `container(*command, env=..., volumes=..., shm_size=..., **run_kwargs)`
  starts a tracked container (removed after the test) and returns a `Running` with `.ports`,
  `.wait()`, `.logs()`, `.exec()`, `.read_file()`, `.supervisor_status()`, `.health()`.
  `module_container` is the same factory, its containers shared by one test module.
- `jupyter_ready(running)`: waits until `/api/status` answers with the token; returns the token.
- `ssh_key`: a fresh RSA key (paramiko) and its public line (`ssh_key.public` for PUBLIC_KEY).
- `ssh_client(running, key=..., user=..., password=...)`: a connected paramiko client, closed
  after the test; `ssh_run(client, cmd)` -> (status, output).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.helpers import net

docker = pytest.importorskip("docker")

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
IMAGE = os.environ.get("IMAGE", "pytorch-cuda-diskinfo:test")
STATE = "/run/pytorch-cuda"


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the image tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # any failure means "no engine here"
        _unavailable(f"Docker engine unreachable: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def image(docker_client: Any) -> str:
    try:
        docker_client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        _unavailable(f"image {IMAGE} not built: run `make test-image` (or set IMAGE)")
    return IMAGE


@dataclass
class Running:
    """One container under test, with the helpers tests read like a user's session with."""

    obj: Any
    ports: dict[str, int]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.obj.id

    def reload(self) -> Running:
        self.obj.reload()
        return self

    def status(self) -> str:
        return self.reload().obj.status

    def wait(self, timeout: float = 60) -> int:
        """The exit code; fails the test if the container is still running after timeout."""
        return int(self.obj.wait(timeout=timeout)["StatusCode"])

    def logs(self) -> str:
        return self.obj.logs(stdout=True, stderr=True).decode(errors="replace")

    def exec(self, cmd: str | list[str], user: str = "root", timeout: int = 30) -> tuple[int, str]:
        """Run cmd in the container (bounded by `timeout`): (exit code, stdout+stderr)."""
        argv = ["timeout", str(timeout), *(["bash", "-c", cmd] if isinstance(cmd, str) else cmd)]
        result = self.obj.exec_run(argv, user=user)
        return result.exit_code, result.output.decode(errors="replace")

    def read_file(self, path: str) -> str:
        code, out = self.exec(["cat", path])
        assert code == 0, f"cannot read {path}: {out}"
        return out

    def supervisor_status(self) -> dict[str, str]:
        """program -> state (RUNNING, EXITED, ...) as supervisorctl reports it."""
        _, out = self.exec(["supervisorctl", "-c", "/etc/pytorch-cuda/supervisord.conf", "status"])
        return {
            line.split()[0]: line.split()[1] for line in out.splitlines() if len(line.split()) > 1
        }

    def supervisor_pid(self, program: str) -> int:
        _, out = self.exec(
            ["supervisorctl", "-c", "/etc/pytorch-cuda/supervisord.conf", "pid", program]
        )
        return int(out.strip()) if out.strip().isdigit() else 0

    def wait_for_program(self, program: str, state: str = "RUNNING", timeout: float = 60) -> None:
        def reached() -> bool:
            if self.status() == "exited":  # no use waiting: say why it ended
                exit_code = self.obj.attrs["State"].get("ExitCode")
                pytest.fail(
                    f"the container exited ({exit_code}) before {program} reached {state}:\n"
                    + self.logs()[-3000:]
                )
            return self.supervisor_status().get(program) == state

        net.wait_until(
            reached,
            timeout,
            lambda: f"{program} never reached {state}: {self.supervisor_status()}",
        )

    def health(self) -> str:
        return self.reload().obj.attrs["State"].get("Health", {}).get("Status", "none")


class ContainerFactory:
    """Starts tracked containers on the host network, each with its own free ports.

    Jupyter is off unless the test asks for it (env={"JUPYTER_ENABLE": "1"}): it is the slowest
    service to start and most tests do not need it.
    """

    def __init__(self, client: Any, image: str) -> None:
        self.client, self.image, self.started = client, image, []

    def __call__(
        self,
        *command: str,
        env: dict[str, str] | None = None,
        volumes: dict[str, dict[str, str]] | None = None,
        shm_size: str | None = None,
        **kwargs: Any,
    ) -> Running:
        names = ("JUPYTER_PORT", "SSH_PORT", "METRICS_PORT")
        ports = dict(zip(names, net.free_ports(len(names)), strict=True))
        full_env = {"JUPYTER_ENABLE": "0", **{k: str(v) for k, v in ports.items()}, **(env or {})}
        obj = self.client.containers.run(
            self.image,
            list(command) or None,
            detach=True,
            network_mode="host",
            environment=full_env,
            volumes=volumes or {},
            shm_size=shm_size,
            **kwargs,
        )
        self.started.append(obj)
        return Running(obj, ports, full_env)

    def cleanup(self) -> None:
        for obj in self.started:
            with contextlib.suppress(docker.errors.NotFound):
                obj.remove(force=True)


@pytest.fixture(scope="session")
def new_port() -> Callable[[], int]:
    """free_port, for tests that start servers of their own next to a container."""
    return net.free_port


@pytest.fixture(scope="session")
def wait_until() -> Callable[..., Any]:
    """wait_until(predicate, timeout, message): poll until truthy, else fail with message."""
    return net.wait_until


@pytest.fixture
def container(docker_client: Any, image: str) -> Iterator[ContainerFactory]:
    factory = ContainerFactory(docker_client, image)
    yield factory
    factory.cleanup()


@pytest.fixture(scope="module")
def module_container(docker_client: Any, image: str) -> Iterator[ContainerFactory]:
    factory = ContainerFactory(docker_client, image)
    yield factory
    factory.cleanup()


def jupyter_token(running: Running) -> str:
    return running.read_file(f"{STATE}/jupyter-token").strip()


def _wait_for_jupyter(running: Running, timeout: float = 90) -> str:
    """Poll Jupyter's /api/status with the container's token until it answers 200; the token."""
    import requests

    port = running.ports["JUPYTER_PORT"]

    def ready() -> str | None:
        if running.status() != "running":
            pytest.fail(f"container ended before Jupyter answered:\n{running.logs()[-3000:]}")
        token = jupyter_token(running)
        r = requests.get(f"http://127.0.0.1:{port}/api/status", params={"token": token}, timeout=3)
        return token if r.status_code == 200 else None

    return net.wait_until(
        ready, timeout, lambda: f"Jupyter never answered on {port}:\n{running.logs()[-3000:]}"
    )


@pytest.fixture(scope="session")
def jupyter_ready() -> Callable[..., str]:
    return _wait_for_jupyter


@dataclass
class SshKey:
    key: Any  # paramiko.PKey
    public: str  # the authorized_keys line


@pytest.fixture(scope="session")
def ssh_key() -> SshKey:
    paramiko = pytest.importorskip("paramiko")
    key = paramiko.RSAKey.generate(2048)
    return SshKey(key, f"{key.get_name()} {key.get_base64()} test@image-tests")


def _ssh_connect(
    running: Running,
    key: Any = None,
    user: str = "jovyan",
    password: str | None = None,
    timeout: float = 30,
    retry: bool = True,
) -> Any:
    """A connected paramiko SSHClient (caller closes it). Retries until sshd listens."""
    import paramiko

    def attempt() -> Any:
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            client.connect(
                "127.0.0.1",
                port=running.ports["SSH_PORT"],
                username=user,
                pkey=key,
                password=password,
                allow_agent=False,
                look_for_keys=False,
                timeout=5,
                banner_timeout=5,
                auth_timeout=5,
            )
        except Exception:
            client.close()
            raise
        return client

    if not retry:
        return attempt()
    net.wait_for_port(running.ports["SSH_PORT"], timeout)
    return attempt()


@pytest.fixture
def ssh_client() -> Iterator[Callable[..., Any]]:
    clients: list[Any] = []

    def connect(*args: Any, **kwargs: Any) -> Any:
        client = _ssh_connect(*args, **kwargs)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


@pytest.fixture(scope="session")
def ssh_run() -> Callable[..., tuple[int, str]]:
    return _ssh_run


def _ssh_run(client: Any, command: str, timeout: float = 30) -> tuple[int, str]:
    """Run command over an SSH connection: (exit status, stdout+stderr)."""
    _, stdout, stderr = client.exec_command(command, timeout=timeout)
    out = stdout.read().decode(errors="replace") + stderr.read().decode(errors="replace")
    return stdout.channel.recv_exit_status(), out
