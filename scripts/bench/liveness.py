"""Rule liveness with 1,000 rules: Prometheus requests per round and event-loop time.

Starts a real prometheus scraping itself every second, and judges 1,000 alerting rules
against it (docs/PERFORMANCE.md): a quarter on metrics that exist (live), a quarter on metrics that
do not (each with its `_total` and `ray_vllm:` alternatives asked), a quarter whose label matcher
empties an existing metric (its values named), a quarter with a `rate` window under two scrape
intervals. Measured: the requests of one round (`fetch_facts` + verdicts), the event loop's busy
time and longest callback during it (`LoopMeter`: work in threads does not count), and the board's
per-refresh cost once the round is done (`LivenessView.annotate` of 1,000 statuses: no request).
Budget: ≤ 50 ms of event-loop time.

    .venv/bin/python scripts/bench/liveness.py [--rules 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oncall.alerts.liveness_fetch import LivenessCache
from oncall.backends.prometheus import PrometheusClient
from oncall.model.alerts import AlertRule, RuleStatus
from oncall.service.liveness import LivenessView
from oncall_drill.netutil import free_loopback_port
from scripts.bench.loop_time import LoopMeter
from scripts.bench.prometheus_process import launch_prometheus

KINDS = ("live", "missing", "emptied", "window")


def expr_of(index: int) -> str:
    kind = KINDS[index % 4]
    if kind == "live":
        return f"rate(prometheus_http_requests_total[5m]) > {index}"
    if kind == "missing":
        return f"rate(vllm:bench_missing_{index}[5m]) > 0"
    if kind == "emptied":
        return f'prometheus_http_requests_total{{handler="/nope/{index}"}} > 0'
    return f"rate(prometheus_http_requests_total[1s]) > {index}"


def statuses(count: int) -> list[RuleStatus]:
    return [
        RuleStatus(
            AlertRule(name=f"Bench{i:04d}", expr=expr_of(i), group="bench", file="b.yaml", line=i),
            "local",
            "inactive",
            (),
        )
        for i in range(count)
    ]


def scraped_itself(url: str) -> bool:
    """Whether the prometheus at `url` holds its own request counter (handler labels and all)."""
    query = f"{url}/api/v1/query?query=prometheus_http_requests_total"
    with urllib.request.urlopen(query, timeout=1) as answer:  # noqa: S310 - loopback
        return b'"handler"' in answer.read()


def start_prometheus(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A prometheus scraping itself every second; the process and its URL once it has."""
    port = free_loopback_port()
    config = (
        "global: {scrape_interval: 1s}\n"
        f"scrape_configs: [{{job_name: prometheus, static_configs: "
        f"[{{targets: ['127.0.0.1:{port}']}}]}}]\n"
    )
    return launch_prometheus(directory, port, config, scraped_itself, what="start scraping itself")


async def measure(url: str, count: int, rounds: int) -> None:
    every = statuses(count)
    exprs = [s.rule.expr for s in every]
    meter = LoopMeter()
    busy, busy_cpu, longest, requests, walls = [], [], [], [], []
    states: dict[str, int] = {}
    with meter.installed():
        for _ in range(rounds):
            async with PrometheusClient(url, timeout=10) as prom:
                cache = LivenessCache(prom)
                meter.reset()
                started = time.perf_counter()
                await cache.wait_fresh(exprs)
                walls.append(time.perf_counter() - started)
                busy.append(meter.busy_s)
                busy_cpu.append(meter.busy_cpu_s)
                longest.append(meter.longest_s)
                requests.append(prom.requests)
                states = {}
                for verdict in cache.known.values():
                    states[verdict.state] = states.get(verdict.state, 0) + 1
                view = LivenessView(prom, every_s=300, wait=False)  # as the board has it
                view.cache = cache
                before = prom.requests
                started = time.perf_counter()  # no await inside: all of it on the loop
                annotated = await view.annotate(every)
                annotate_ms = (time.perf_counter() - started) * 1000
                assert prom.requests == before and len(annotated) == count
    print(f"{count} alerting rules, {rounds} liveness rounds against a real prometheus")
    print(f"verdicts: {states}")
    print(f"requests per round: {statistics.median(requests):.0f}")
    print(f"round wall time: median {statistics.median(walls) * 1000:.0f} ms")
    print(
        f"event-loop busy per round: median {statistics.median(busy) * 1000:.1f} ms, "
        f"max {max(busy) * 1000:.1f} ms (CPU of the loop thread: median "
        f"{statistics.median(busy_cpu) * 1000:.1f} ms); longest callback: median "
        f"{statistics.median(longest) * 1000:.1f} ms, max {max(longest) * 1000:.1f} ms"
    )
    print("event-loop busy by round, ms: " + ", ".join(f"{b * 1000:.1f}" for b in busy))
    print(f"board refresh with verdicts known (annotate {count} statuses): {annotate_ms:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_prometheus(Path(tmp))
        try:
            asyncio.run(measure(url, max(4, min(args.rules, 20_000)), max(1, min(args.rounds, 50))))
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
