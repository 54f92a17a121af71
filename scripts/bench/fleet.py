"""Fleet scale (docs/PERFORMANCE.md), against `oncall drill up --fleet` (started here, or
`--dir` of a running one): 5,000 pods over 50 nodes, 400 GPUs, 200 fleet rules.

(a) the `kube.pods` probe for the vLLM selector (`app=vllm` in `ai`), through its public entry
    point (`oncall.probes.registry`), warm: wall (target <= 0.3 s) and event-loop time (<= 50 ms;
    `loop_time.LoopMeter`: the callbacks' summed time, and the longest one). Baselines in the same
    run: a bare httpx GET of the same list with its JSON parsed, and the unbounded list of the
    whole namespace (what a probe listing without a selector would pay).
(b) a board refresh (`AlertEngine.refresh`, source `prometheus`) with the drill's rules and
    thousands of instances: event-loop time (<= 50 ms), and the longest a 2 ms timer came late
    in a run (median over runs; `loop_time.LagMeter`: what the loop's busy time misses while a
    worker thread holds the GIL). Baseline: a bare GET /api/v1/rules with its JSON parsed.
(c) the app's RSS, headless, after `--minutes` in fleet mode (<= 200 MB); baseline: the bare
    app's RSS at start (tui_rss).

    With `--soak-only`, (c) alone; `--trace-growth N` prints the N allocation sites whose
    memory grew most from minute 2 to the end of the soak (tracemalloc; a diagnosis: the soak's
    RSS then does not count).

    .venv/bin/python scripts/bench/fleet.py [--runs 10] [--minutes 10] [--dir DRILL_DIR]
        [--board-only | --soak-only] [--trace-growth N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

# Run as a script: the checkout on the path for the shared `scripts.bench` helpers.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oncall.alerts.engine import AlertEngine
from oncall.alerts.loader import load_rule_files
from oncall.backends.prometheus import PrometheusClient
from oncall.probes.context import ProbeContext
from oncall.probes.registry import all_probes
from oncall.settings.loader import load_settings
from scripts.bench.checklist import kube_access
from scripts.bench.loop_time import LagMeter, LoopMeter, verdict
from scripts.bench.tui_rss import run_soak, summarize_soak

ONCALL = str(Path(sys.executable).parent / "oncall")
SELECTOR = "app=vllm"
RSS_BUDGET_MB = 200
Row = tuple[str, float, float, float, float]  # name, median wall, loop, max longest, median lag


async def measure(
    name: str, runs: int, meter: LoopMeter, once: Callable[[], Awaitable[object]]
) -> Row:
    """Median wall and loop time, the longest callback and timer lag seen, over runs (after
    one warm-up)."""
    await once()
    walls, busy, longest, lags, lag = [], [], 0.0, [], LagMeter()
    lag.start()
    for _ in range(runs):
        meter.reset()
        lag.reset()
        started = time.perf_counter()
        await once()
        walls.append(time.perf_counter() - started)
        busy.append(meter.busy_s)
        longest = max(longest, meter.longest_s)
        await asyncio.sleep(2 * lag.tick_s)  # a wake-up due at the end is counted in this run
        lags.append(lag.longest_s)
    await lag.stop()
    return name, statistics.median(walls), statistics.median(busy), longest, statistics.median(lags)


async def bench_pods(directory: Path, runs: int, meter: LoopMeter) -> tuple[list[Row], str]:
    settings = load_settings(config=directory / "oncall.yaml").settings
    probe = all_probes()["kube.pods"]
    params = probe.params.model_validate({"selector": SELECTOR})
    server, token = kube_access(directory)
    ns = settings.kubernetes.namespace
    verify: Any = str(directory / "tls" / "ca.crt") if server.startswith("https") else False
    rows = []
    async with ProbeContext(settings) as ctx:
        cold = time.perf_counter()
        facts = await probe.run(ctx, params)
        cold_s = time.perf_counter() - cold

        async def probe_once() -> object:
            return await probe.run(ctx, params)

        rows.append(await measure("kube.pods app=vllm (probe)", runs, meter, probe_once))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        base_url=server, headers=headers, verify=verify, timeout=30
    ) as http:

        async def bare(query: dict[str, str]) -> object:
            reply = await http.get(f"/api/v1/namespaces/{ns}/pods", params=query)
            return reply.raise_for_status().json()

        rows.append(
            await measure(
                "baseline: httpx GET + JSON", runs, meter, lambda: bare({"labelSelector": SELECTOR})
            )
        )
        everything = await bare({})
        rows.append(await measure(f"unbounded: all of {ns}", runs, meter, lambda: bare({})))
    total = len(everything["items"]) if isinstance(everything, dict) else 0
    note = (
        f"{facts['count']} pods match of {total} in {ns!r}; first (cold) probe run {cold_s:.2f} s"
    )
    return rows, note


async def bench_board(directory: Path, runs: int, meter: LoopMeter) -> tuple[list[Row], str, float]:
    """(b): the rows, a note, and the requests per refresh."""
    settings = load_settings(config=directory / "oncall.yaml").settings
    url = str(settings.prometheus.url)
    rules = load_rule_files([directory / "rules"], for_scale=settings.alerts.for_scale).rules
    rows = []
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=30) as raw:

        async def bare() -> object:
            return (await raw.get("/api/v1/rules", params={"type": "alert"})).json()

        rows.append(await measure("baseline: GET /api/v1/rules + JSON", runs, meter, bare))
        body = await bare()
    assert isinstance(body, dict)
    deployed = [r for g in body["data"]["groups"] for r in g["rules"]]
    instances = sum(len(r.get("alerts") or []) for r in deployed)
    async with PrometheusClient(url, timeout=10) as prom:
        engine = AlertEngine(prom, rules, source="prometheus")
        rows.append(await measure("board refresh (AlertEngine)", runs, meter, engine.refresh))
        requests = prom.requests / (runs + 1)  # the warm-up's and the runs'
    note = f"{len(rules)} rules loaded, {len(deployed)} deployed, {instances} instances"
    return rows, note, requests


def wait_instances(directory: Path, wanted: int, timeout: float) -> int:
    """Poll Prometheus until `wanted` alert instances are active (or timeout); their count."""
    settings = load_settings(config=directory / "oncall.yaml").settings
    deadline, count = time.monotonic() + timeout, 0
    with httpx.Client(base_url=str(settings.prometheus.url), trust_env=False, timeout=30) as client:
        while time.monotonic() < deadline:
            count = len(client.get("/api/v1/alerts").json()["data"]["alerts"])
            if count >= wanted:
                break
            time.sleep(1)
    return count


def soak_verdict(last: dict[str, Any], active: int) -> bool:
    """(c)'s verdict: the RSS at the end within RSS_BUDGET_MB, and whether it counts: the
    board held (nearly) the instances Prometheus has, and no refresh failed."""
    held = last["instances"] >= 0.9 * active and last["stale"] == 0 and last["failed"] == 0
    ok = bool(last["rss_mb"] <= RSS_BUDGET_MB and held)
    print(
        f"budget: RSS at the end {last['rss_mb']:.1f} MB (<= {RSS_BUDGET_MB} MB) with the board "
        f"holding {last['instances']} instances of {active} active, {last['failed']} of "
        f"{last['refreshes']} refreshes failed: {'MET' if ok else 'NOT MET'}"
        + ("" if held else " (the board did not hold the fleet: the figure does not count)")
    )
    return ok


def print_rows(title: str, rows: list[Row], note: str) -> None:
    baseline = rows[1][1] if len(rows) > 1 and rows[0][0].startswith("kube") else rows[0][1]
    print(title)
    print(f"  {note}")
    print(f"  {'':36} {'wall ms':>8} {'x base':>7} {'loop ms':>8} {'longest ms':>11} {'lag ms':>7}")
    for name, wall, busy, longest, lag in rows:
        print(
            f"  {name:36} {wall * 1000:8.1f} {wall / baseline:7.2f} {busy * 1000:8.1f} "
            f"{longest * 1000:11.1f} {lag * 1000:7.1f}"
        )
    print()


def bench_probe_and_board(directory: Path, runs: int, board_only: bool) -> None:
    """(a) unless board_only, and (b), printed with (b)'s verdict."""
    meter = LoopMeter()
    with meter.installed():
        if not board_only:
            pods, pods_note = asyncio.run(bench_pods(directory, runs, meter))
        board, board_note, requests = asyncio.run(bench_board(directory, runs, meter))
    print(f"median of {runs} warm runs; loop = summed callback time; 2 shared cores")
    if not board_only:
        print_rows("(a) kube.pods for the vLLM selector over the fleet", pods, pods_note)
    print_rows("(b) board refresh", board, board_note)
    _, _, busy, _, lag = board[-1]
    prom = f"requests {requests:g} to Prometheus"
    verdict("(b) board refresh", busy, lag, prom, requests == 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--minutes", type=float, default=10.0, help="RSS soak (0: skip)")
    parser.add_argument("--dir", type=Path, help="a running `drill up --fleet` directory")
    parser.add_argument("--board-only", action="store_true", help="(b) alone: no (a), no (c)")
    parser.add_argument("--soak-only", action="store_true", help="(c) alone")
    parser.add_argument("--trace-growth", type=int, default=0, help="top N growing sites")
    args = parser.parse_args()
    if args.board_only and args.soak_only:
        parser.error("--board-only and --soak-only exclude each other")
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.dir or Path(tmp) / "drill"
        if args.dir is None:
            up = [ONCALL, "drill", "up", "--fleet", "--dir", str(directory), "--for-scale", "0.05"]
            started = time.monotonic()
            subprocess.run(up, check=True, stdout=subprocess.DEVNULL, timeout=180)
            print(f"drill up --fleet in {time.monotonic() - started:.1f} s")
        try:
            print(f"{wait_instances(directory, 5000, 120)} alert instances active\n")
            if not args.soak_only:
                bench_probe_and_board(directory, args.runs, args.board_only)
            if args.minutes > 0 and not args.board_only:
                out = Path(tmp) / "soak.jsonl"
                run_soak(directory / "oncall.yaml", args.minutes * 60, out, args.trace_growth)
                rows = [json.loads(line) for line in out.read_text().splitlines() if line]
                summarize_soak(rows, args.minutes, "a fleet drill (drill up --fleet)", None)
                soak_verdict(rows[-1], wait_instances(directory, 0, 30))  # active now
        finally:
            if args.dir is None:
                down = [ONCALL, "drill", "down", "--dir", str(directory)]
                subprocess.run(down, check=False, stdout=subprocess.DEVNULL, timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
