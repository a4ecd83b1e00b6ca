"""Ports and polling shared by the system and image tests (host network: every server a test
starts needs a port nobody else uses, and readiness is polled, never slept for)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest


def free_port() -> int:
    """A port nobody listens on now (host network: containers share the host's ports)."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` different free ports: each is held while the next is chosen, so the kernel cannot
    hand out one twice (one container's JUPYTER_PORT and METRICS_PORT were once the same, and
    it refused to start)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(n):
            s = held.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def wait_until(
    predicate: Callable[[], Any],
    timeout: float,
    message: str | Callable[[], str],
    step: float = 0.5,
) -> Any:
    """Poll predicate until it returns a truthy value, which is returned; fail after timeout,
    naming the last value or exception the predicate gave."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except Exception as exc:
            last = exc
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            pytest.fail(f"{text} (after {timeout:g} s; last: {last!r:.300})")
        time.sleep(step)


def wait_for_port(port: int, timeout: float = 30) -> None:
    def listening() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    wait_until(listening, timeout, f"nothing listens on port {port}")
