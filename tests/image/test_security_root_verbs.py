"""jovyan (anyone with the Jupyter token or an SSH key) races links into the folders that the
operator's root `docker exec C diskinfo pack|bench` writes, as our docs tell the operator to
run them: no root-only file may change owner, mode or content, and no root-only file may end
up in jovyan's shards. Each race is retried; the counts that won against the old code (files
opened and chmodded by name in jovyan's folders) are in docs/security.md."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.image

CANARY = "/usr/local/lib/pytorch-cuda/run/canary.sh"  # stands for healthcheck.sh: root runs it
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"
PACK_TRIES = 5
BENCH_TRIES = 12

# Waits for the pack's state file (written right after DEST is cleared), then plants a link
# under every shard's temporary name, old (fixed) and new (random, swapped as they appear).
PLANT_SHARDS = f"""
dest=/workspace/packed
until [ -e $dest/.diskinfo-pack-state.json ]; do :; done
for i in $(seq 0 15); do ln -s {CANARY} $dest/.shard-$(printf %06d $i).tar.tmp 2>/dev/null; done
end=$((SECONDS + 20))
while [ $SECONDS -lt $end ] && [ ! -e $dest/manifest.json ]; do
  for f in $dest/.shard-*.tmp; do
    [ -f "$f" ] && [ ! -L "$f" ] && rm -f "$f" && ln -s {CANARY} "$f"
  done
done
"""

# Swaps write_atomic's temporary baseline file for a link to the SSH host key, as it appears.
SWAP_BASELINE = f"""
end=$((SECONDS + 15))
while [ $SECONDS -lt $end ]; do
  for f in /workspace/logs/.diskinfo-baseline.json.*.tmp; do
    [ -f "$f" ] && [ ! -L "$f" ] && rm -f "$f" && ln -s {HOST_KEY} "$f"
  done
done
"""


@pytest.fixture(scope="module")
def running(module_container):
    running = module_container("sleep", "3600")
    running.wait_for_program("diskinfo", timeout=90)
    code, out = running.exec(
        f"printf '#!/bin/sh\\nexit 0\\n' >{CANARY} && chmod 0755 {CANARY}"
        f" && (test -e {HOST_KEY} || ssh-keygen -q -t ed25519 -N '' -f {HOST_KEY})"
    )
    assert code == 0, out
    return running


def _files(running, *paths: str) -> str:
    _, out = running.exec(["stat", "-c", "%n %U %G %a %s", *paths])
    _, sums = running.exec(["sha256sum", *paths])
    return out + sums


def _attack(running, script: str) -> None:
    running.obj.exec_run(["timeout", "60", "bash", "-c", script], user="jovyan", detach=True)


def test_root_pack_never_hands_a_file_to_jovyan(running):
    code, out = running.exec(
        "mkdir -p /workspace/tree && cd /workspace/tree && for c in a b; do mkdir -p $c;"
        " for i in $(seq 100); do head -c 16384 /dev/urandom >$c/$i.bin; done; done",
        user="jovyan",
    )
    assert code == 0, out
    before = _files(running, CANARY)
    for attempt in range(PACK_TRIES):
        _attack(running, PLANT_SHARDS)
        code, out = running.exec(
            "diskinfo pack /workspace/tree /workspace/packed --shards 16 --force", timeout=120
        )
        assert _files(running, CANARY) == before, f"try {attempt + 1}: {out}"
        running.exec("pkill -u jovyan -f 'diskinfo-pack-state' || true")
    # root gave the pack to DEST's owner, and said so in one line
    assert "running as jovyan (uid 1000), the owner of /workspace" in out, out


def test_root_pack_never_packs_what_the_owner_of_src_cannot_read(running):
    code, out = running.exec(
        "mkdir -p /workspace/leak/a && cd /workspace/leak/a"
        " && for i in $(seq 5); do echo $i >$i.txt; done"
        f" && ln -s /etc/shadow 6.txt && ln -s {HOST_KEY} 7.txt"
        " && ln -s /run/pytorch-cuda/supervisord.conf 8.txt",
        user="jovyan",
    )
    assert code == 0, out
    secrets = (
        'grep -rlF -e "$(head -n1 /etc/shadow)" -e "$(sed -n 2p {key})" {dest} 2>/dev/null || true'
    )
    # DEST is jovyan's: root runs the pack as jovyan, who cannot read the targets
    code, out = running.exec("diskinfo pack /workspace/leak /workspace/leak-out", timeout=60)
    # the first link pack meets is named: a folder is read in the order it lists its files
    # (never held whole as a sorted list, whatever its size), so any of the three
    assert code != 0 and re.search(r"cannot read /workspace/leak/a/[678]\.txt", out), out
    assert out.strip().splitlines()[-1].startswith("diskinfo: error: "), out
    _, found = running.exec(secrets.format(key=HOST_KEY, dest="/workspace/leak-out"))
    assert not found.strip(), found
    # DEST is root's: root stays root, and packs only what SRC's owner may read
    code, out = running.exec("diskinfo pack /workspace/leak /srv/leak-out", timeout=60)
    assert code != 0, out
    assert "jovyan (uid 1000), the owner of SRC, may not read it" in out, out
    assert "running as" not in out, out
    _, found = running.exec(secrets.format(key=HOST_KEY, dest="/srv/leak-out"))
    assert not found.strip(), found


def test_root_bench_never_chmods_the_host_key(running):
    before = _files(running, HOST_KEY)
    out = ""
    for attempt in range(BENCH_TRIES):
        _attack(running, SWAP_BASELINE)
        _, out = running.exec(
            "diskinfo bench /workspace --size 1M --seconds 0.05 --json", timeout=60
        )
        running.exec("pkill -u jovyan -x bash || true")
        assert _files(running, HOST_KEY) == before, f"try {attempt + 1}: {out}"
    assert "running as jovyan (uid 1000), the owner of /workspace/logs" in out, out
