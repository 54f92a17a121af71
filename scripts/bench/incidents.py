"""Grouping 1,000 rules with 5,000 firing instances into incidents: event-loop time per
refresh, against a baseline in the same run (budget: <= 50 ms per refresh).

A real redis-server keeps the incidents (`IncidentStore.merge`: WATCH, read, fold, MULTI/EXEC).
Every instance has an at-firing verdict whose checklist fails on one of 50 Deployments (100
instances each, fired within a minute), so the refresh groups all 5,000 and folds them into 50
open incidents of 100 members each: the storm's worst case. Times, median of N refreshes,
steady state (the incidents already stored, as from the second refresh on): the event loop's
busy time (`loop_time.LoopMeter`; the grouping itself runs in a thread past
`THREAD_ABOVE` instances and does not count) and the longest single callback.

- baseline: the same refresh's 5,000 instances written as `oncall alerts -o json` writes them
  (json.dumps of their labels and states), on the loop;
- incidents: `IncidentsView.update` with the 1,000 statuses and 5,000 verdicts.

    .venv/bin/python scripts/bench/incidents.py [--refreshes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script: the checkout on the path for the shared `scripts.bench` helpers.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oncall.model.alerts import AlertInstance, AlertRule, RuleStatus
from oncall.service.incidents import IncidentsView
from oncall.settings import Settings
from oncall_drill.netutil import free_loopback_port
from scripts.bench.loop_time import LoopMeter

RULES, FIRING_RULES, PER_RULE, DEPLOYMENTS = 1000, 50, 100, 50
BUDGET_S = 0.050


def statuses_and_verdicts(now: float) -> tuple[list[RuleStatus], list[dict[str, Any]]]:
    statuses, verdicts = [], []
    for r in range(RULES):
        name = f"Rule{r:04d}"
        rule = AlertRule(name=name, expr="x > 1", group="g", file="bench.yaml", line=r + 1)
        firing = r < FIRING_RULES
        instances = []
        for i in range(PER_RULE if firing else 0):
            labels = {"pod": f"p{i:03d}", "namespace": "ai"}
            since = now - 60 + (i % 60)
            instances.append(AlertInstance(name, "firing", labels, 2.0, since, None, 0.0, since,
                                           "prometheus"))  # fmt: skip
            deployment = f"vllm-{i % DEPLOYMENTS}"
            verdicts.append({
                "status": "checked", "context": "", "alert": name, "ran_at": since,
                "labels": {"alertname": name, **labels},
                "steps": [
                    {"id": "deployment", "probe": "kube.deployment", "status": "ok",
                     "params": {"name": deployment}, "facts": {"name": deployment}},
                    {"id": "kv_cache", "probe": "vllm.rates", "status": "fail",
                     "params": {}, "facts": {"kv_cache_usage": 0.97}},
                    {"id": "latency", "probe": "prometheus.query", "status": "fail",
                     "params": {"query": "q"}, "facts": {}},
                ],
            })  # fmt: skip
        state = "firing" if firing else "inactive"
        statuses.append(RuleStatus(rule, "prometheus", state, tuple(instances)))  # type: ignore[arg-type]
    return statuses, verdicts


def baseline(statuses: list[RuleStatus]) -> str:
    return json.dumps([
        {"name": s.rule.name, "state": s.state,
         "instances": [{"labels": i.labels, "state": i.state, "active_since": i.active_since}
                       for i in s.instances]}
        for s in statuses
    ])  # fmt: skip


Times = tuple[list[float], list[float], list[float]]


async def measure(
    view: IncidentsView, statuses: list[RuleStatus], verdicts: list[dict[str, Any]], refreshes: int
) -> Times:
    meter = LoopMeter()
    base: list[float] = []
    inc: list[float] = []
    longest: list[float] = []
    with meter.installed():
        await view.update(statuses, verdicts)  # the first refresh stores the incidents
        for _ in range(refreshes):
            meter.reset()
            await asyncio.sleep(0)  # its own callback: a baseline on the loop
            baseline(statuses)
            await asyncio.sleep(0)
            base.append(meter.busy_s)
            meter.reset()
            found = await view.update(statuses, verdicts)
            inc.append(meter.busy_s)
            longest.append(meter.longest_s)
    assert len(found) == DEPLOYMENTS and sum(len(i.members) for i in found) == 5000, found[:1]
    assert view.error is None, view.error
    return base, inc, longest


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--refreshes", type=int, default=10)
    args = parser.parse_args()
    binary = shutil.which("redis-server")
    if binary is None:
        print("redis-server not found on PATH", file=sys.stderr)
        return 2
    port = free_loopback_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp],
            stdout=subprocess.DEVNULL,
        )
        try:
            settings = Settings.model_validate({"redis": {"url": f"redis://127.0.0.1:{port}/0"}})
            view = IncidentsView(settings)
            statuses, verdicts = statuses_and_verdicts(time.time())

            async def run() -> Times:
                deadline = time.monotonic() + 10
                while True:  # bounded: redis-server is up within its first second
                    try:
                        await view.store.ids()
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.05)
                try:
                    return await measure(view, statuses, verdicts, args.refreshes)
                finally:
                    await view.aclose()

            base, inc, longest = asyncio.run(run())
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    b, i, lg = (statistics.median(x) for x in (base, inc, longest))
    print(f"{RULES} rules, {FIRING_RULES * PER_RULE} firing instances, {DEPLOYMENTS} incidents; "
          f"median of {args.refreshes} refreshes, event-loop busy time:")  # fmt: skip
    print(f"  baseline (the instances as JSON):   {b * 1000:7.1f} ms")
    print(
        f"  incidents (IncidentsView.update):   {i * 1000:7.1f} ms  "
        f"({i / b:.2f}x baseline; longest callback {lg * 1000:.1f} ms)"
    )
    ok = i <= BUDGET_S
    print(f"  budget <= {BUDGET_S * 1000:.0f} ms: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
