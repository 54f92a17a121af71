"""Alert refresh across contexts: three contexts, 200 rules each, through the app's sources.

Starts per context one real prometheus (each with the same 200 alerting rules, a third
active), sending its alerts to the context's own real Alertmanager, and a redis-server for
the context's acknowledgements (read beside Alertmanager's routing); writes settings with
`contexts:` naming them, and refreshes the live sources the app makes
(`oncall.service.contexts.live_alert_sources`: one `LiveAlerts` per context, its own clients),
all contexts at once as the app's per-context loops do. Reports per round of refreshes, all
contexts together: the event loop's busy time (`loop_time.LoopMeter`), its lag (the longest a
2 ms timer came late, `loop_time.LagMeter`), the process's CPU time; and the requests of each
context to Prometheus and to Alertmanager. Budget (docs/PERFORMANCE.md): event-loop time <=
50 ms summed (busy time and lag, each), 1 request per context per backend.

    .venv/bin/python scripts/bench/contexts_refresh.py [--contexts 3] [--rules 200] [--refreshes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oncall.service.contexts import ContextAlerts, live_alert_sources
from oncall.service.sources import LiveAlerts
from oncall.settings.loader import load_settings
from oncall_drill.components import alertmanager_argv
from oncall_drill.netutil import free_loopback_port
from scripts.bench.alerts_refresh import rule_file, start_prometheus
from scripts.bench.loop_time import LagMeter, LoopMeter, verdict

NAMES = ("eu", "us", "ap", "sa", "me", "af")


def requests_of(source: Any) -> tuple[int, int]:
    """The requests a context's source made so far: to Prometheus, to Alertmanager."""
    inner = source.source if isinstance(source, ContextAlerts) else source
    assert isinstance(inner, LiveAlerts) and inner._engine is not None
    view = inner.alertmanager
    am = view.client.requests if view is not None and view.client is not None else 0
    return int(inner._engine.prom.requests), int(am)


async def measure(config: Path, refreshes: int) -> tuple[list[list[float]], list[dict[str, Any]]]:
    """Per round: [busy, lag, cpu, loop cpu, loop callbacks] and each context's (prometheus,
    alertmanager) requests."""
    settings = load_settings(config=config, environ={}).settings
    sources = live_alert_sources(settings)
    meter, lag = LoopMeter(), LagMeter()
    try:
        await asyncio.gather(*(s.refresh() for s in sources.values()))  # warm-up: engines
        await asyncio.gather(*(s.refresh() for s in sources.values()))  # and the silences
        times: list[list[float]] = [[], [], [], [], []]
        requests: list[dict[str, Any]] = []
        with meter.installed():
            lag.start()
            for _ in range(refreshes):
                before = {name: requests_of(s) for name, s in sources.items()}
                meter.reset()
                lag.reset()
                started = time.process_time()
                rounds = await asyncio.gather(*(s.refresh() for s in sources.values()))
                cpu = time.process_time() - started
                await asyncio.sleep(2 * lag.tick_s)  # a wake-up due at the end counts here
                for column, value in enumerate((meter.busy_s, lag.longest_s, cpu,
                                                 meter.busy_cpu_s, meter.callbacks)):  # fmt: skip
                    times[column].append(value)
                now = {name: requests_of(s) for name, s in sources.items()}
                requests.append({n: (now[n][0] - before[n][0], now[n][1] - before[n][1])
                                 for n in sources})  # fmt: skip
                assert all(len(statuses) >= 1 for statuses in rounds)
            await lag.stop()
        routed = sum(s.routing is not None for statuses in rounds for s in statuses)
        print(f"rules with Alertmanager's routing in the last round: {routed}", file=sys.stderr)
        return times, requests
    finally:
        for source in sources.values():
            await source.aclose()


def start_context(directory: Path, rules: Path, stack: contextlib.ExitStack) -> dict[str, Any]:
    """One context's prometheus, Alertmanager and redis-server; its settings."""
    am_port, redis_port = free_loopback_port(), free_loopback_port()
    started = [
        subprocess.Popen(alertmanager_argv(am_port, directory / "am"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]  # fmt: skip
    # Ready before its prometheus starts: a first send that fails is repeated only a minute
    # later (Prometheus' resend delay).
    wait_ready(f"http://127.0.0.1:{am_port}")
    prom, url = start_prometheus(directory, rules, f"127.0.0.1:{am_port}")
    for proc in (*started, prom):
        stack.callback(proc.wait, 10)
        stack.callback(proc.terminate)
    return {"prometheus": {"url": url},
            "alertmanager": {"url": f"http://127.0.0.1:{am_port}"},
            "redis": {"url": f"redis://127.0.0.1:{redis_port}/0"}}  # fmt: skip


def wait_ready(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/-/ready", timeout=2, trust_env=False).status_code == 200:
                return
        time.sleep(0.2)
    raise SystemExit(f"{url} did not get ready")


def wait_alertmanagers(contexts: dict[str, dict[str, Any]], timeout: float = 90) -> None:
    """Until each context's Alertmanager holds the alerts its prometheus sent (bounded)."""
    deadline = time.monotonic() + timeout
    for name, context in contexts.items():
        url = context["alertmanager"]["url"]
        while True:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                if httpx.get(f"{url}/api/v2/alerts", timeout=5, trust_env=False).json():
                    break
            if time.monotonic() > deadline:
                raise SystemExit(f"context {name}: its Alertmanager got no alert")
            time.sleep(0.5)


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
        contexts = {}
        for name in names:
            (Path(tmp) / name).mkdir()
            contexts[name] = start_context(Path(tmp) / name, rules_path, stack)
        config = Path(tmp) / "oncall.yaml"
        config.write_text(yaml.safe_dump({
            "alerts": {"packs": [], "files": [str(rules_path)]}, "contexts": contexts,
        }))  # fmt: skip
        wait_alertmanagers(contexts)
        times, requests = asyncio.run(measure(config, args.refreshes))
    busy, lag, cpu, loop_cpu, callbacks = (statistics.median(column) for column in times)
    per_context = {
        name: tuple(statistics.median(r[name][i] for r in requests) for i in (0, 1))
        for name in names
    }
    print(f"{len(names)} contexts x {args.rules} alerting rules, each with its Alertmanager, "
          f"median of {args.refreshes} rounds (all contexts at once)")  # fmt: skip
    print(f"  event-loop busy ms per round, all contexts: {busy * 1000:.1f} "
          f"(max {max(times[0]) * 1000:.1f}; the loop thread's CPU {loop_cpu * 1000:.1f}; "
          f"{callbacks:g} callbacks); lag ms {lag * 1000:.1f}; "
          f"process CPU ms {cpu * 1000:.1f}")  # fmt: skip
    print(
        "  requests per refresh (Prometheus, Alertmanager): "
        + ", ".join(f"{n} {p:g}+{a:g}" for n, (p, a) in per_context.items())
    )
    ok = all(counts == (1, 1) for counts in per_context.values())
    verdict(f"{len(names)} contexts summed", busy, lag, "1 request per context per backend", ok)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
