"""The monitor's memory in the image: its resident set (RSS) while the image's demo trains,
default settings (interval 5 s) with metrics on (the default) and off (METRICS_PORT=0), for a
reference image and this tree's, side by side in the same run.

Each round starts each image with `demo` as the training command and KEEP_ALIVE=1, waits for
the demo's end (about a minute of training under the monitor; /metrics scraped every 2 s
when on, as Prometheus would), then reads the monitor's /proc/PID/status: VmHWM (its peak
RSS) and VmRSS. The reference in the same container: a bare
`python3 -I -c pass` of the image's interpreter (VmHWM), the floor any Python monitor pays;
the monitor is reported in MiB and as a multiple of it.

    flock /tmp/bench.lock python -m benchmarks.bench_monitor_memory \\
        --before pytorch-cuda-diskinfo:BEFORE --after pytorch-cuda-diskinfo:AFTER [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import subprocess
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

from tests.helpers import net

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results/monitor_memory.md"
TARGET_MIB = 25.0
DOCKER = "/usr/bin/docker"


def status_kib(container: str, pid: str, field: str) -> int:
    text = subprocess.run(
        [DOCKER, "exec", container, "cat", f"/proc/{pid}/status"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(x for x in text.splitlines() if x.startswith(field + ":"))
    return int(line.split()[1])


def logs(container: str) -> str:
    out = subprocess.run([DOCKER, "logs", container], capture_output=True, text=True)
    return out.stdout + out.stderr


def one(image: str, metrics: bool = True, timeout: float = 300) -> dict[str, float]:
    """Peak and current RSS of the monitor (MiB) and the interpreter floor, one container."""
    ports = net.free_ports(3)
    env = {
        "KEEP_ALIVE": "1",
        "JUPYTER_PORT": str(ports[0]),
        "SSH_PORT": str(ports[1]),
        "METRICS_PORT": str(ports[2]) if metrics else "0",
    }
    args = [DOCKER, "run", "-d", "--network", "host", "--shm-size=1g"]
    for name, value in env.items():
        args += ["-e", f"{name}={value}"]
    container = subprocess.run(
        [*args, image, "demo"], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        deadline = time.monotonic() + timeout
        while "training exited with status" not in logs(container):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{image}: the demo did not end in {timeout:.0f} s")
            if metrics:  # scraped as Prometheus would: rendering /metrics counts too
                with contextlib.suppress(OSError):
                    urllib.request.urlopen(f"http://127.0.0.1:{ports[2]}/metrics", timeout=5).read()
            time.sleep(2)
        pid = subprocess.run(
            [DOCKER, "exec", container, "pgrep", "-f", "bin/diskinfo watch"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[0]
        peak = "print(next(x for x in open('/proc/self/status') if x.startswith('VmHWM:')))"
        floor = subprocess.run(
            [DOCKER, "exec", container, "python3", "-I", "-c", peak],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[1]
        return {
            "peak_mib": status_kib(container, pid, "VmHWM") / 1024,
            "rss_mib": status_kib(container, pid, "VmRSS") / 1024,
            "floor_mib": int(floor) / 1024,
        }
    finally:
        subprocess.run([DOCKER, "rm", "-f", container], capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the reference image")
    ap.add_argument("--after", required=True, help="this tree's image")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--write", action="store_true", help=f"rewrite {RESULTS.name}")
    args = ap.parse_args()
    cases = [(side, metrics) for metrics in ("on", "off") for side in ("before", "after")]
    runs: dict[tuple[str, str], list[dict[str, float]]] = {case: [] for case in cases}
    for _ in range(args.rounds):  # interleaved: the host's load falls on both alike
        for side, metrics in cases:
            result = one(getattr(args, side), metrics == "on")
            runs[side, metrics].append(result)
            print(side, metrics, {k: round(v, 2) for k, v in result.items()}, flush=True)
    med = {
        case: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for case, rs in runs.items()
    }
    lines = [
        "# The monitor's memory in the image (benchmarks/bench_monitor_memory.py)",
        "",
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()}: "
        f"{args.rounds} rounds, the two images interleaved; each round starts the image with "
        "`demo` as the training command (default settings: interval 5 s, Jupyter on; metrics "
        "on, the default, and off, METRICS_PORT=0) and reads the monitor's /proc/PID/status "
        "after the demo's end. Medians; each round's figures below the table.",
        "",
        "| image | metrics | monitor peak RSS (VmHWM, MiB) | monitor RSS at the end (MiB) | "
        "python3 -I -c pass (MiB) | peak / floor |",
        "|---|---|---|---|---|---|",
    ]
    for side, metrics in cases:
        m = med[side, metrics]
        lines.append(
            f"| {side}: `{getattr(args, side)}` | {metrics} | {m['peak_mib']:.1f} | "
            f"{m['rss_mib']:.1f} | {m['floor_mib']:.1f} | {m['peak_mib'] / m['floor_mib']:.2f}x |"
        )
    lines.append("")
    for metrics in ("on", "off"):
        after, before = med["after", metrics]["peak_mib"], med["before", metrics]["peak_mib"]
        lines.append(
            f"- metrics {metrics}: after / before, peak RSS {after / before:.2f}x "
            f"({abs(before - after):.1f} MiB {'less' if after <= before else 'more'}); "
            f"target at most {TARGET_MIB:.0f} MiB: "
            f"{'met' if after <= TARGET_MIB else 'NOT met'} ({after:.1f} MiB)."
        )
    lines.append(
        "- rounds: "
        + "; ".join(
            f"{side} metrics {metrics} {r['peak_mib']:.1f}/{r['rss_mib']:.1f}/{r['floor_mib']:.1f}"
            for (side, metrics), rs in runs.items()
            for r in rs
        )
        + " (peak/end/floor MiB)."
    )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
