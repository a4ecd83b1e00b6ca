"""ports.py: a service port another program holds is found before the service starts, with a
free port to move to (docker/start/init.d/70-ports.sh leaves the service off and says so)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from tests.helpers.scripts import load

ports = load("start/ports.py")


@contextmanager
def listening(addr: str = "0.0.0.0") -> Iterator[int]:
    """A port some other program listens on (no SO_REUSEADDR, like most servers)."""
    with socket.socket() as sock:
        sock.bind((addr, 0))
        sock.listen()
        yield sock.getsockname()[1]


def _binds(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def test_a_listener_on_any_address_takes_the_port_and_its_end_frees_it():
    with listening("127.0.0.1") as port:
        assert ports.taken("0.0.0.0", port)  # what sshd and Jupyter bind
        assert ports.taken("127.0.0.1", port)
    assert not ports.taken("0.0.0.0", port)
    with listening("0.0.0.0") as port:
        assert ports.taken("127.0.0.1", port)


def test_a_taken_port_gets_the_setting_and_a_free_port_that_no_other_service_wants():
    with listening() as jupyter, listening() as metrics:
        next_up = jupyter + 1
        found = dict(
            ports.check(
                [
                    ("jupyter", "0.0.0.0", jupyter),
                    ("metrics", "0.0.0.0", metrics),
                    ("sshd", "0.0.0.0", next_up),
                ]
            )
        )
        assert {"jupyter", "metrics"} <= set(found)
        assert ("sshd" in found) == (not _binds(next_up))  # sshd's own port: free, most likely
        text = found["jupyter"]
        assert text.startswith(f"port {jupyter} is already in use here")
        assert "--network host" in text
        suggested = int(text.rsplit("-e JUPYTER_PORT=", 1)[1])
        assert suggested > jupyter and suggested not in (jupyter, metrics, next_up)
        assert _binds(suggested)
        assert "-e METRICS_PORT=" in found["metrics"]


def test_main_writes_the_state_file_the_banner_reads_and_prints_the_same(tmp_path, capsys):
    state = tmp_path / "ports-taken"
    with listening() as port:
        free = next(p for p in range(port + 2, port + 100) if _binds(p))
        assert ports.main([str(state), f"jupyter=0.0.0.0:{port}", f"sshd=0.0.0.0:{free}"]) == 0
    out = capsys.readouterr().out
    assert out == state.read_text()
    assert out.startswith(f"jupyter\tport {port} is already in use here") and out.count("\n") == 1
    assert ports.main([str(state)]) == 0 and state.read_text() == ""  # nothing wanted


def test_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys):
    assert ports.main([str(tmp_path / "f"), "ftp=0.0.0.0:21"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "NAME=ADDR:PORT" in err and "Traceback" not in err
    assert ports.main([]) == 2


def test_a_taken_privileged_port_moves_to_2222_or_above_not_to_the_next_one():
    found = ports.free_above("0.0.0.0", 22, set())
    assert found is not None and ports.SSH_ALTERNATIVE <= found < ports.SSH_ALTERNATIVE + 100
    assert _binds(found)
    assert ports.free_above("0.0.0.0", 65535, set()) is None  # nothing above the last port


def test_a_check_that_cannot_finish_says_so_in_one_line_and_starts_everything(tmp_path, capsys):
    with listening() as port:
        assert ports.main([str(tmp_path / "no" / "dir"), f"jupyter=0.0.0.0:{port}"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ports.py: port check skipped:") and err.count("\n") == 1
