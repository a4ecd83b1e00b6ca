"""jovyan (anyone with the Jupyter token or an SSH key) races links into the folders that an
operator's root `docker exec C diskinfo ...` or `python3 ...` (typed without `-u`) works in: no
root-only file may change owner, mode or content, no root-only file may end up in jovyan's
shards, and no code of jovyan's may run as root. Each race is retried. The tests of the
findings (`test_finding_*`) each failed against the image of the code before identity decided
(a verb stayed root when the folder it writes, stat()ed through jovyan's links, was root's;
the log sink opened its files by name; root's Python put /workspace on sys.path): the failures
seen are quoted in each test."""

from __future__ import annotations

import base64
import os
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
    # root became NB_USER, and said so in one line
    assert "diskinfo: running as jovyan (uid 1000): a verb started as root runs as NB_USER" in out


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
    # root runs the pack as jovyan, who cannot read the targets
    code, out = running.exec("diskinfo pack /workspace/leak /workspace/leak-out", timeout=60)
    # the first link pack meets is named: a folder is read in the order it lists its files
    # (never held whole as a sorted list, whatever its size), so any of the three
    assert code != 0 and re.search(r"cannot read /workspace/leak/a/[678]\.txt", out), out
    assert out.strip().splitlines()[-1].startswith("diskinfo: error: "), out
    _, found = running.exec(secrets.format(key=HOST_KEY, dest="/workspace/leak-out"))
    assert not found.strip(), found
    # DEST is root's: the old rule stayed root here; NB_USER may not write it
    code, out = running.exec("diskinfo pack /workspace/leak /srv/leak-out", timeout=60)
    assert code != 0 and "running as jovyan" in out, out
    # kept root on purpose: jovyan's SRC is refused before anything is read
    code, out = running.exec("diskinfo pack --as-root /workspace/leak /srv/leak-out", timeout=60)
    assert code == 2 and "/workspace/leak: /workspace is writable by an account other" in out, out
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
    assert "running as jovyan (uid 1000)" in out, out


def _sums(running, *paths: str) -> str:
    _, out = running.exec(["sh", "-c", 'stat -c "%n %U %a %s" "$@"; sha256sum "$@"', "-", *paths])
    return out


def _write(running, path: str, text: str) -> None:
    """`text` into `path`, as jovyan (through base64: no shell quoting of the code)."""
    data = base64.b64encode(text.encode()).decode()
    code, out = running.exec(
        f"mkdir -p {os.path.dirname(path)} && echo {data} | base64 -d >{path}", user="jovyan"
    )
    assert code == 0, out


P4TRAIN = """import os, sys
print("P4TRAIN-UID=%d" % os.geteuid(), file=sys.stderr)
def make():
    import torch
    return torch.utils.data.TensorDataset(torch.zeros(256, 4))
"""


def test_finding_tune_never_imports_jovyans_code_as_root(running):
    """jovyan points /workspace/logs at /tmp (root's) and writes a p4train.py; root runs the
    documented `diskinfo tune p4train:make`. Before: no "running as" line and the module ran
    with uid 0 (`P4TRAIN-UID=0`), with `--out /root/x` too."""
    _write(running, "/workspace/p4train.py", P4TRAIN)
    code, out = running.exec(
        "mv /workspace/logs /workspace/logs.orig && ln -s /tmp /workspace/logs", user="jovyan"
    )
    assert code == 0, out
    try:
        for extra in ("", " --out /root/x"):
            _, out = running.exec(f"diskinfo tune p4train:make --budget 3{extra}", timeout=120)
            assert "P4TRAIN-UID=0" not in out, out
            assert "P4TRAIN-UID=1000" in out and "running as jovyan (uid 1000)" in out, out
        code, out = running.exec("diskinfo tune p4train:make --budget 3 --as-root")
        assert code == 2 and "P4TRAIN-UID" not in out, out
        code, out = running.exec("DISKINFO_AS_ROOT=1 diskinfo tune p4train:make --budget 3")
        assert code == 2 and "never does so as root" in out and "P4TRAIN-UID" not in out, out
    finally:
        running.exec(
            "rm -f /workspace/logs /workspace/p4train.py"
            " && mv /workspace/logs.orig /workspace/logs",
            user="jovyan",
        )


def test_finding_pack_through_src_and_dst_links_packs_nothing_root_only(running):
    """jovyan: links in /var/tmp/x to /etc/shadow, the SSH host key and supervisord's config;
    /workspace/data/src -> /var/tmp, /workspace/data/dst -> /mnt (root's). Root: `diskinfo pack
    /workspace/data/src /workspace/data/dst`. Before: "packed 3 samples" into a 0644 shard of
    root's in /mnt that jovyan read the private key and the shadow line from."""
    code, out = running.exec(
        "mkdir -p /var/tmp/x && ln -sf /etc/shadow /var/tmp/x/1.txt"
        f" && ln -sf {HOST_KEY} /var/tmp/x/2.txt"
        " && ln -sf /run/pytorch-cuda/supervisord.conf /var/tmp/x/3.txt"
        " && ln -sfn /var/tmp /workspace/data/src && ln -sfn /mnt /workspace/data/dst",
        user="jovyan",
    )
    assert code == 0, out
    for flag in ("", "--as-root "):
        code, out = running.exec(
            f"diskinfo pack {flag}/workspace/data/src /workspace/data/dst", timeout=60
        )
        assert code != 0 and "packed" not in out, out
        assert out.strip().splitlines()[-1].startswith("diskinfo: error: "), out
        _, listed = running.exec("ls -A /mnt")
        assert listed.strip() == "", listed
    running.exec("rm -rf /var/tmp/x /workspace/data/src /workspace/data/dst", user="jovyan")


# Once root's `diskinfo watch` has decided and taken its lock (diskinfo.lock appears in /tmp,
# where the logs link leads), swap the link for a folder whose log files are links to root's
# .bashrc: the window between the old drop decision and the first write.
SWAP_WATCH_LOGS = """
ln -sfn /tmp /workspace/wlogs
until [ -e /tmp/diskinfo.lock ]; do :; done
rm -f /workspace/wlogs && mkdir /workspace/wlogs
for f in diskinfo.jsonl diskinfo.log; do ln -s /root/.bashrc /workspace/wlogs/$f; done
"""


def test_finding_watch_never_writes_through_a_swapped_logs_link(running):
    """Before: the root watch decided to stay root (/tmp is root's), then appended its records
    to /root/.bashrc through the swapped-in links (2 of 2 tries)."""
    before = _sums(running, "/root/.bashrc")
    for attempt in range(2):
        running.exec("rm -rf /workspace/wlogs", user="jovyan")
        running.exec("rm -f /tmp/diskinfo.lock")
        _attack(running, SWAP_WATCH_LOGS)
        _, out = running.exec(
            "diskinfo watch /workspace --log-dir /workspace/wlogs --count 3 --interval 0.5"
            " --metrics-port 0",
            timeout=60,
        )
        running.exec("pkill -u jovyan -x bash || true")
        assert _sums(running, "/root/.bashrc") == before, f"try {attempt + 1}: {out}"
        assert "running as jovyan (uid 1000)" in out, out


PLANTED = "import os\nos.geteuid() == 0 and open('/root/pwned-{name}', 'w').close()\n"


def test_finding_root_python_in_the_workdir_imports_nothing_of_jovyans(running):
    """jovyan: /workspace/torch.py, /workspace/pip/__init__.py, /workspace/code/json.py; root:
    `docker exec C python3 -c 'import torch'`, `python3 -m pip --version`, and with an
    operator's `-e PYTHONPATH=/workspace/code`, in the image's WORKDIR. Before: each ran as
    uid 0 (Python puts the working directory first on sys.path; 3.10 has no PYTHONSAFEPATH)."""
    for name, path in (
        ("torch", "/workspace/torch.py"),
        ("pip", "/workspace/pip/__init__.py"),
        ("json", "/workspace/code/json.py"),
    ):
        _write(running, path, PLANTED.format(name=name))
    for argv, env in (
        (["python3", "-c", "import torch; print(torch.__file__)"], {}),
        (["python3", "-m", "pip", "--version"], {}),
        (["python3", "-c", "import json"], {"PYTHONPATH": "/workspace/code"}),
    ):
        result = running.obj.exec_run(argv, user="root", environment=env)  # WORKDIR: /workspace
        assert result.exit_code == 0, result.output
    _, pwned = running.exec("ls /root | grep pwned || true")
    assert pwned.strip() == "", pwned
    # jovyan's own Python still imports jovyan's module from jovyan's folder
    _, out = running.exec("python3 -c 'import torch; print(torch.__file__)'", user="jovyan")
    assert out.strip() == "/workspace/torch.py", out
    running.exec("rm -rf /workspace/torch.py /workspace/pip /workspace/code", user="jovyan")
