"""Drill environment: time of `oncall drill up`, time until Prometheus has every target up,
and idle RSS of the whole stack; each against the two real servers alone (redis-server +
prometheus, started the same way in the same run) as the baseline.

Budget (docs/PERFORMANCE.md): up in <= 10 s, idle at <= 300 MB RSS in total, on 2 cores.

    .venv/bin/python scripts/bench/drill_env.py [--runs 3] [--idle 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from oncall_drill.netutil import free_loopback_port, wait_for_port

ONCALL = str(Path(sys.executable).parent / "oncall")


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def targets_all_up(prometheus: str) -> bool:
    try:
        url = f"{prometheus}/api/v1/targets?state=active"
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - loopback
            found = json.load(response)["data"]["activeTargets"]
    except OSError:
        return False
    return len(found) >= 7 and all(t["health"] == "up" for t in found)


def bench_drill(idle: float) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "drill"
        started = time.monotonic()
        subprocess.run([ONCALL, "drill", "up", "--dir", str(directory)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        up_s = time.monotonic() - started
        state = json.loads((directory / "state.json").read_text())
        deadline = time.monotonic() + 30
        while not targets_all_up(state["urls"]["prometheus"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        targets_s = time.monotonic() - started
        time.sleep(idle)  # let the stack settle into its idle state before reading RSS
        pids = {p for proc in state["processes"] for p in descendants(proc["pid"])}
        total = sum(rss_mb(pid) for pid in pids)
        subprocess.run([ONCALL, "drill", "down", "--dir", str(directory)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        return up_s, targets_s, total


def bench_baseline(idle: float) -> tuple[float, float]:
    """redis-server + prometheus alone: start to ready, and their idle RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        redis_port, prom_port = free_loopback_port(), free_loopback_port()
        config = Path(tmp) / "prometheus.yml"
        config.write_text("global: {scrape_interval: 1s}\nscrape_configs: []\n")
        started = time.monotonic()
        procs = [
            subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port",
                              str(redis_port), "--bind", "127.0.0.1", "--save", ""],
                             stdout=subprocess.DEVNULL),
            subprocess.Popen([shutil.which("prometheus") or "prometheus",
                              f"--config.file={config}", f"--storage.tsdb.path={tmp}/data",
                              f"--web.listen-address=127.0.0.1:{prom_port}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        ]  # fmt: skip
        try:
            wait_for_port(redis_port, 10)
            url = f"http://127.0.0.1:{prom_port}/-/ready"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(url, timeout=1):  # loopback
                        break
                except OSError:
                    time.sleep(0.05)
            ready_s = time.monotonic() - started
            time.sleep(idle)
            total = sum(rss_mb(p.pid) for p in procs)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=10)
        return ready_s, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds before reading RSS")
    args = parser.parse_args()
    drill = [bench_drill(args.idle) for _ in range(args.runs)]
    base = [bench_baseline(args.idle) for _ in range(args.runs)]
    up_s = statistics.median(d[0] for d in drill)
    targets_s = statistics.median(d[1] for d in drill)
    rss = statistics.median(d[2] for d in drill)
    base_ready = statistics.median(b[0] for b in base)
    base_rss = statistics.median(b[1] for b in base)
    print(f"median of {args.runs} runs; idle {args.idle:g}s before RSS")
    print(f"{'':44} {'value':>9} {'x baseline':>11}")
    print(f"{'baseline: redis-server + prometheus ready':44} {base_ready:8.2f}s {1.0:11.1f}")
    print(f"{'oncall drill up returns':44} {up_s:8.2f}s {up_s / base_ready:11.1f}")
    label = "every Prometheus target up (from start)"
    print(f"{label:44} {targets_s:8.2f}s {targets_s / base_ready:11.1f}")
    print(f"{'baseline RSS: redis-server + prometheus':44} {base_rss:7.0f}MB {1.0:11.1f}")
    print(f"{'drill stack idle RSS (all processes)':44} {rss:7.0f}MB {rss / base_rss:11.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
