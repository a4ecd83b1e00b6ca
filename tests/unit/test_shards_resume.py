"""A training killed at any step resumes at the next sample: ShardDataset's state, saved by
torchdata's StatefulDataLoader after every batch, restores the epoch, the shard order, the
shuffle buffer and the place in the stream, for every DataLoader worker of every rank.

The training is a real process, killed with SIGKILL several times at random steps (one in
the second epoch, where the epoch itself must come back from the state: no `set_epoch`), then
run to the end. Each step saves the loader's state together with the keys the step consumed,
in one atomic rename, as a training checkpoint would; so the keys in the last checkpoint are
what the training saw. They must equal an uninterrupted run's, in the same order, and the
ranks together must see every sample once per epoch. Ranks are separate processes that split
the shards with ShardDataset's own `rank=`/`world_size=` (as under torch.distributed, without
the collective: test_shards_ddp.py runs gloo).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import diskinfo
from diskinfo.shards import ShardDataset
from diskinfo.shards.pack import pack
from tests.helpers import ROOT

pytest.importorskip("torchdata")
from torchdata.stateful_dataloader import StatefulDataLoader

BATCH, BUFFER, EPOCHS, SAMPLES = 4, 16, 2, 240


def key(sample: dict) -> str:
    return sample["__key__"]


def train(dest: str, rank: int, world: int, workers: int, ckpt: str, pause: float) -> None:
    """The training process: one checkpoint per step, as `torch.save` of model and loader
    state would be (pickle and rename here: the model is left out)."""
    ds = ShardDataset(dest, rank=rank, world_size=world, transform=key, shuffle_buffer=BUFFER)
    loader = StatefulDataLoader(
        ds, batch_size=BATCH, num_workers=workers, persistent_workers=workers > 0
    )
    state: dict = {"epoch": 0, "keys": [[] for _ in range(EPOCHS)], "loader": None}
    path = Path(ckpt)
    if path.exists():
        state = pickle.loads(path.read_bytes())
        loader.load_state_dict(state["loader"])
    for epoch in range(state["epoch"], EPOCHS):  # no set_epoch: the state carries the epoch
        for batch in loader:
            state["keys"][epoch] += batch
            state["loader"] = loader.state_dict()
            save(path, state)
            time.sleep(pause)
        state["epoch"], state["loader"] = epoch + 1, loader.state_dict()
        save(path, state)


def save(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        fh.write(pickle.dumps(state))
    os.replace(tmp, path)


def steps(ckpt: Path) -> int:
    try:
        state = pickle.loads(ckpt.read_bytes())
    except FileNotFoundError:
        return 0
    return sum(len(keys) for keys in state["keys"]) // BATCH


def launch(dest: Path, rank: int, world: int, workers: int, ckpt: Path) -> subprocess.Popen:
    code = (
        "from tests.unit.test_shards_resume import train; "
        f"train({str(dest)!r}, {rank}, {world}, {workers}, {str(ckpt)!r}, 0.03)"
    )
    src = Path(diskinfo.__file__).parents[1]  # the diskinfo under test, wherever it is
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, start_new_session=True)


def kill_at(procs: dict[Path, subprocess.Popen], targets: dict[Path, int]) -> None:
    """SIGKILL each training once its checkpoint reaches its target step."""
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs.values()) and time.monotonic() < deadline:
        for ckpt, proc in procs.items():
            if proc.poll() is None and steps(ckpt) >= targets[ckpt]:
                proc.send_signal(signal.SIGKILL)
        time.sleep(0.003)
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        with_workers_gone(proc)
        assert proc.returncode == -signal.SIGKILL, f"exit {proc.returncode} before its kill"


def with_workers_gone(proc: subprocess.Popen) -> None:
    """DataLoader workers notice their parent's death by themselves; make sure of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """240 samples in 12 shards: 3 shards for each of 2 ranks x 2 workers."""
    root = tmp_path_factory.mktemp("resume")
    rng = random.Random(2)
    for c in range(3):
        (root / "src" / f"c{c}").mkdir(parents=True)
        for i in range(SAMPLES // 3):
            (root / "src" / f"c{c}" / f"{i:03d}.bin").write_bytes(rng.randbytes(24))
    pack(root / "src", root / "out", shards=12)
    return root / "out"


@pytest.mark.slow
@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.parametrize("workers", [0, 2])
def test_killed_training_resumes_at_the_next_sample(
    packed: Path, tmp_path: Path, workers: int, world: int
) -> None:
    reference = []
    for rank in range(world):
        train(str(packed), rank, world, workers, str(tmp_path / f"ref-{rank}.pkl"), 0)
        reference.append(pickle.loads((tmp_path / f"ref-{rank}.pkl").read_bytes())["keys"])
    per_epoch = SAMPLES // world // BATCH
    rng = random.Random(f"{workers}/{world}")
    ckpts = [tmp_path / f"rank-{rank}.pkl" for rank in range(world)]
    # three kills per rank: in the first epoch, at its end, in the second; the last one 8
    # steps (240 ms) before the end, so that a busy machine still kills before it finishes
    last = 2 * per_epoch - 8
    plans = {
        c: [rng.randrange(1, per_epoch - 1), per_epoch, rng.randrange(per_epoch + 1, last)]
        for c in ckpts
    }
    for kill in range(3):
        procs = {c: launch(packed, r, world, workers, c) for r, c in enumerate(ckpts)}
        kill_at(procs, {c: plans[c][kill] for c in ckpts})
    for rank, ckpt in enumerate(ckpts):
        proc = launch(packed, rank, world, workers, ckpt)
        assert proc.wait(timeout=120) == 0
        got = pickle.loads(ckpt.read_bytes())["keys"]
        assert got == reference[rank], f"rank {rank}: resumed order differs"
    for epoch in range(EPOCHS):
        seen = sorted(k for rank in range(world) for k in reference[rank][epoch])
        assert len(seen) == len(set(seen)) == SAMPLES
    assert reference[0][0] != reference[0][1]  # the second epoch is reshuffled: its own state


def test_a_state_from_another_layout_is_refused(packed: Path) -> None:
    ds = ShardDataset(packed, rank=0, world_size=2)
    state = ds.state_dict()
    assert state["world_size"] == 2 and state["yielded"] == 0
    other = ShardDataset(packed)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="resume with the same ranks and DataLoader workers"):
        iter(other)
    with pytest.raises(ValueError, match="not a ShardDataset state"):
        other.load_state_dict({**state, "yielded": "3"})
