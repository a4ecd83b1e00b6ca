"""Secrets reach only the programs that need them (a secret in a program's environment is
readable to whoever can read its /proc), read from
/proc/*/environ as root and as jovyan: the Jupyter token and PUBLIC_KEY reach no program's
environment; other `-e` secrets reach the training command and Jupyter, never the monitor,
the log tees, sshd, supervisord or the training wrapper."""

from __future__ import annotations

import pytest

from tests.helpers import net

pytestmark = pytest.mark.image

TOKEN = "tok-s3cret-111"
AWS = "aws-s3cret-222"
API = "api-s3cret-333"
TRAIN = "import time; time.sleep(300)"
# pid, user, and whether each secret is in its environment; then its command line
SCAN = r"""
for d in /proc/[0-9]*; do
  # owner first: a process that ends mid-scan (a health check) is skipped, not shown ownerless
  owner=$(stat -c %U "$d" 2>/dev/null) || continue
  env=$(tr '\0' '\n' <"$d/environ" 2>/dev/null) || continue
  cmd=$(tr '\0\n|' '   ' <"$d/cmdline" 2>/dev/null)
  [ -n "$cmd" ] || continue
  printf '%s|%s|%s|%s|%s|%s\n' "${d#/proc/}" "$owner" \
    "$(grep -c -e TOKEN_VALUE <<<"$env")" "$(grep -c -e AWS_VALUE -e API_VALUE <<<"$env")" \
    "$(grep -c -e KEY_VALUE <<<"$env")" "$cmd"
done
"""


def _scan(running, key: str, user: str) -> list[tuple[str, str, int, int, int, str]]:
    script = (
        SCAN.replace("TOKEN_VALUE", TOKEN)
        .replace("AWS_VALUE", AWS)
        .replace("API_VALUE", API)
        .replace("KEY_VALUE", key)
    )
    _, out = running.exec(script, user=user)
    rows = []
    for line in out.splitlines():
        parts = line.split("|", 5)
        # the scan itself is a `docker exec`: Docker gives it the container's -e variables
        if len(parts) == 6 and "/proc/[0-9]*" not in parts[5]:
            pid, owner, tok, other, pub, cmd = parts
            rows.append((pid, owner, int(tok), int(other), int(pub), cmd))
    return rows


def test_secrets_only_where_needed(container, ssh_key, jupyter_ready):
    running = container(
        "python3",
        "-c",
        TRAIN,
        env={
            "JUPYTER_ENABLE": "1",
            "JUPYTER_TOKEN": TOKEN,
            "AWS_SECRET_ACCESS_KEY": AWS,
            "MY_API_KEY": API,
            "PUBLIC_KEY": ssh_key.public,
        },
    )
    jupyter_ready(running)
    running.wait_for_program("sshd")
    key_blob = ssh_key.public.split()[1][-40:]

    # root without CAP_SYS_PTRACE reads only root's environments, jovyan only jovyan's: both
    def scan() -> list[tuple[str, str, int, int, int, str]]:
        rows = {r[0]: r for r in _scan(running, key_blob, "root")}
        rows.update({r[0]: r for r in _scan(running, key_blob, "jovyan")})
        return list(rows.values())

    net.wait_until(lambda: any("diskinfo watch" in r[5] for r in scan()), 60, "no monitor")
    rows = scan()
    table = "\n".join(map(str, rows))
    clean = ("diskinfo watch", "log-tee.py", "sshd:", "supervisord-run", "run-train.sh", "listener")
    for name in (*clean, "jupyter-lab", TRAIN):
        assert any(name in r[5] for r in rows), f"{name} not found:\n{table}"
    for pid, owner, token, other, public_key, cmd in rows:
        where = f"{cmd} (pid {pid}, {owner})\n{table}"
        if TRAIN in cmd or "jupyter-lab" in cmd:
            assert (token, other, public_key) == (0, 2, 0), f"keeps -e secrets, no token: {where}"
        elif owner != "root" or any(name in cmd for name in clean):
            assert (token, other, public_key) == (0, 0, 0), f"holds a secret: {where}"
        # else: a `docker exec` or Docker's health check, given the -e variables by Docker
    # what jovyan can read: none of root's programs
    assert not [r for r in _scan(running, key_blob, "jovyan") if r[1] == "root"]
