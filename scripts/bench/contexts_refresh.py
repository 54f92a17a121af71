"""Alert refresh across contexts: three contexts, 200 rules each, through the app's sources.

Starts one real prometheus per context (each with the same 200 alerting rules, a third
active), writes settings with `contexts:` naming them, and refreshes the live sources the app
makes (`oncall.service.contexts.live_alert_sources`: one `LiveAlerts` per context, its own
client), all contexts at once as the app's per-context loops do. Reports per round of
refreshes the CPU time of the process summed over the contexts (the time the event loop was
busy; waiting on sockets costs none; budget ≤ 50 ms) and the Prometheus requests of each
context (budget: 1 each).

    .venv/bin/python scripts/bench/contexts_refresh.py [--contexts 3] [--rules 200] [--refreshes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oncall.service.contexts import ContextAlerts, live_alert_sources
from oncall.service.sources import LiveAlerts
from oncall.settings.loader import load_settings
from scripts.bench.alerts_refresh import rule_file, start_prometheus

NAMES = ("eu", "us", "ap", "sa", "me", "af")


def requests_of(source: Any) -> int:
    """The Prometheus requests a context's source made so far."""
    inner = source.source if isinstance(source, ContextAlerts) else source
    assert isinstance(inner, LiveAlerts) and inner._engine is not None
    return int(inner._engine.prom.requests)


async def measure(config: Path, refreshes: int) -> tuple[list[float], list[dict[str, int]]]:
    settings = load_settings(config=config, environ={}).settings
    sources = live_alert_sources(settings)
    try:
        await asyncio.gather(*(s.refresh() for s in sources.values()))  # warm-up: engines
        cpu: list[float] = []
        requests: list[dict[str, int]] = []
        for _ in range(refreshes):
            before = {name: requests_of(s) for name, s in sources.items()}
            started = time.process_time()
            rounds = await asyncio.gather(*(s.refresh() for s in sources.values()))
            cpu.append(time.process_time() - started)
            requests.append({name: requests_of(s) - before[name] for name, s in sources.items()})
            assert all(len(statuses) >= 1 for statuses in rounds)
        return cpu, requests
    finally:
        for source in sources.values():
            await source.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=3, choices=range(1, len(NAMES) + 1))
    parser.add_argument("--rules", type=int, default=200)
    parser.add_argument("--refreshes", type=int, default=20)
    args = parser.parse_args()
    names = NAMES[: args.contexts]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        rules_path = Path(tmp) / "bench.yaml"
        rules_path.write_text(rule_file(args.rules))
        urls = {}
        for name in names:
            (Path(tmp) / name).mkdir()
            proc, urls[name] = start_prometheus(Path(tmp) / name, rules_path)
            stack.callback(proc.wait, 10)
            stack.callback(proc.terminate)
        config = Path(tmp) / "oncall.yaml"
        config.write_text(yaml.safe_dump({
            "alerts": {"packs": [], "files": [str(rules_path)]},
            "contexts": {name: {"prometheus": {"url": urls[name]}} for name in names},
        }))  # fmt: skip
        time.sleep(2)  # let each prometheus evaluate the rules a couple of times
        cpu, requests = asyncio.run(measure(config, args.refreshes))
    per_context = {name: statistics.median(r[name] for r in requests) for name in names}
    print(f"{len(names)} contexts x {args.rules} alerting rules, median of {args.refreshes} rounds")
    print(f"  event-loop (CPU) ms per round, all contexts: {statistics.median(cpu) * 1000:.1f}"
          f"  (max {max(cpu) * 1000:.1f})")  # fmt: skip
    print(
        "  Prometheus requests per refresh: "
        + ", ".join(f"{n} {v:g}" for n, v in per_context.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
