"""Alert refresh with 200 rules: Prometheus requests and event-loop (CPU) time per refresh.

Starts a real prometheus with 200 alerting rules (a third of them active), loads the same rules
into the engine, and times refreshes with source `prometheus` (target: 1 request, <= 50 ms of
event-loop time) and source `local` (one instant query per rule). Baseline, in the same run:
one bare GET of /api/v1/rules with its JSON parsed. CPU time of this process is the time the
event loop was busy (waiting on sockets costs none).

    .venv/bin/python scripts/bench/alerts_refresh.py [--rules 200] [--refreshes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oncall.alerts.engine import AlertEngine
from oncall.alerts.loader import load_rule_files
from oncall.backends.prometheus import PrometheusClient
from oncall_drill.netutil import free_loopback_port
from scripts.bench.prometheus_process import answers_ready, launch_prometheus


def rule_file(count: int) -> str:
    lines = ["groups:", "- name: bench", "  rules:"]
    for i in range(count):
        expr = f"vector({i}) > {count * 2 // 3}"  # the top third is active
        lines += [f"  - alert: Bench{i:03d}", f"    expr: {expr}", f"    for: {i % 5}m",
                  "    labels: {severity: page}",
                  f"    annotations: {{summary: 'bench rule {i}'}}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def start_prometheus(
    directory: Path, rules: Path, alertmanager: str | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A prometheus evaluating `rules` every second (sending its alerts to `alertmanager`,
    host:port, when given); the process and its URL once ready."""
    text = f"global: {{evaluation_interval: 1s}}\nrule_files: [{rules}]\n"
    if alertmanager:
        text += (
            f"alerting: {{alertmanagers: [{{static_configs: [{{targets: [{alertmanager}]}}]}}]}}\n"
        )
    return launch_prometheus(directory, free_loopback_port(), text, answers_ready)


async def measure(url: str, rules_path: Path, refreshes: int) -> dict[str, tuple[float, float]]:
    rules = load_rule_files([rules_path]).rules
    results: dict[str, tuple[float, float]] = {}
    async with httpx.AsyncClient(base_url=url, trust_env=False) as raw:
        cpu = []
        for _ in range(refreshes):
            started = time.process_time()
            (await raw.get("/api/v1/rules", params={"type": "alert"})).json()
            cpu.append(time.process_time() - started)
        results["baseline: GET /api/v1/rules + JSON"] = (statistics.median(cpu), 1.0)
    for source in ("prometheus", "local"):
        async with PrometheusClient(url, timeout=5) as prom:
            engine = AlertEngine(prom, rules, source=source)
            await engine.refresh()  # warm up: connections, first states
            cpu, requests = [], []
            for _ in range(refreshes):
                before, started = prom.requests, time.process_time()
                await engine.refresh()
                cpu.append(time.process_time() - started)
                requests.append(prom.requests - before)
            results[f"engine refresh, source {source}"] = (
                statistics.median(cpu),
                statistics.median(requests),
            )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=200)
    parser.add_argument("--refreshes", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rules_path = Path(tmp) / "bench.yaml"
        rules_path.write_text(rule_file(args.rules))
        proc, url = start_prometheus(Path(tmp), rules_path)
        try:
            time.sleep(2)  # let prometheus evaluate the rules a couple of times
            results = asyncio.run(measure(url, rules_path, args.refreshes))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    baseline = results["baseline: GET /api/v1/rules + JSON"][0]
    print(f"{args.rules} alerting rules, median of {args.refreshes} refreshes")
    print(f"{'':40} {'CPU ms':>8} {'x baseline':>11} {'requests':>9}")
    for name, (cpu, requests) in results.items():
        print(f"{name:40} {cpu * 1000:8.1f} {cpu / baseline:11.1f} {requests:9g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
