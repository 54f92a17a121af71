"""A refresh with 1,000 rules from Prometheus and 5,000 instances in Alertmanager, silences
included: event-loop (CPU) time and requests per refresh.

Starts a real prometheus evaluating 1,000 alerting rules (50 of them firing with 100 instances
each, from a scraped metric of 5,000 series) and a real Alertmanager (API v2) holding those
5,000 alerts, posted as Prometheus posts them (same labels) but with an hour's `endsAt`: on a
loaded machine Prometheus' own resends (every evaluation, `endsAt` 4 evaluations ahead) fall
behind and Alertmanager resolves them between two sends. 2,000 of them are silenced (200
silences of ten instances each, by a named author with a comment) and the silences list also
holds 100 expired ones. Times, median of N refreshes: CPU time of this process (worker threads
included; waiting on sockets costs none), the event loop's busy time (`loop_time.LoopMeter`) and
the longest a 2 ms timer came late in a refresh (median over refreshes; `loop_time.LagMeter`:
a key press's worst wait):

- baseline: one bare GET of /api/v2/alerts with its JSON parsed;
- the engine's refresh (Prometheus only: `alertmanager.url` unset);
- the engine's refresh and the Alertmanager view joined to it, steady state (the board's
  refresh; target: <= 50 ms, 1 request to Prometheus + 1 to Alertmanager);
- the same when a new silence appears (its list read again: 2 requests to Alertmanager).

    .venv/bin/python scripts/bench/alertmanager_refresh.py [--refreshes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import yaml

from oncall.alerts.engine import AlertEngine
from oncall.backends.alertmanager import AlertmanagerClient
from oncall.backends.prometheus import PrometheusClient
from oncall.model.alerts import RuleStatus
from oncall.model.matchers import Selection
from oncall.service.alerts import refresh_joined
from oncall.service.routing import AlertmanagerView
from oncall_drill.components import alertmanager_argv
from oncall_drill.netutil import free_loopback_port

# Run as a script: the checkout on the path for the shared `scripts.bench` helpers.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.loop_time import GcMeter, LagMeter, LoopMeter, verdict

RULES, FIRING_RULES, PER_RULE = 1000, 50, 100
#: Silences, each on ten instances (`i=~"004."`): 2,000 instances silenced; and expired ones.
SILENCES, EXPIRED = 200, 100
SILENCED = SILENCES * 10


BASELINE = "baseline: GET /api/v2/alerts + JSON"
NAMES = {
    "prometheus": "engine refresh (Prometheus only)",
    "steady": "+ Alertmanager, steady state",
    "new silence": "+ Alertmanager, silences re-read",
}


def metrics_text() -> bytes:
    lines = [
        f'bench_firing{{shard="s{r:02d}",i="{r * PER_RULE + i:04d}"}} 1'
        for r in range(FIRING_RULES)
        for i in range(PER_RULE)
    ]
    return ("\n".join(["# TYPE bench_firing gauge", *lines]) + "\n").encode()


def rule_file() -> str:
    rules = []
    for r in range(RULES):
        expr = f'bench_firing{{shard="s{r:02d}"}} > 0' if r < FIRING_RULES else "vector(0) > 1"
        rules.append({"alert": f"Bench{r:04d}", "expr": expr,
                      "labels": {"severity": "page", "namespace": "bench"},
                      "annotations": {"summary": "bench {{ $labels.i }}"}})  # fmt: skip
    return yaml.safe_dump({"groups": [{"name": "bench", "rules": rules}]})


def serve_metrics() -> tuple[ThreadingHTTPServer, int]:
    body = metrics_text()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def wait(condition: object, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if callable(condition) and condition():
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass  # not ready yet: a 503 page, not the API's JSON
        time.sleep(0.5)
    raise SystemExit(f"gave up waiting for {what}")


def post_alerts(am: str, metrics_port: int) -> None:
    """The firing instances' alerts, labelled as Prometheus labels them (series labels, the
    target's job and instance, the rule's labels, alertname)."""
    now = time.time()
    alerts = [
        {"labels": {"alertname": f"Bench{r:04d}", "shard": f"s{r:02d}",
                    "i": f"{r * PER_RULE + i:04d}", "job": "bench",
                    "instance": f"127.0.0.1:{metrics_port}", "severity": "page",
                    "namespace": "bench"},
         "annotations": {"summary": "bench"}, "startsAt": rfc3339(now - 60),
         "endsAt": rfc3339(now + 3600)}
        for r in range(FIRING_RULES) for i in range(PER_RULE)
    ]  # fmt: skip
    with httpx.Client(base_url=am, timeout=30, trust_env=False) as client:
        for start in range(0, len(alerts), 500):
            client.post("/api/v2/alerts", json=alerts[start : start + 500]).raise_for_status()


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


def add_silences(am: str) -> None:
    now = time.time()
    with httpx.Client(base_url=am, timeout=10, trust_env=False) as client:
        for i in range(SILENCES + EXPIRED):
            body = {"matchers": [{"name": "i", "value": f"{i % SILENCES:03d}.", "isRegex": True,
                                  "isEqual": True}],
                    "startsAt": rfc3339(now), "endsAt": rfc3339(now + 7200),
                    "createdBy": f"oncall-{i % 7}", "comment": f"bench silence {i}"}  # fmt: skip
            silence_id = client.post("/api/v2/silences", json=body).json()["silenceID"]
            if i >= SILENCES:  # expire the extra ones: the list keeps them, as a team's does
                client.delete(f"/api/v2/silence/{silence_id}")


Row = tuple[float, float, float, float, float, float, float, float]
#: cpu, loop busy, lag, full GCs per refresh, longest GC pause, prom requests, am requests,
#: loop busy in the loop thread's CPU time


async def runs(
    refreshes: int,
    meters: tuple[LoopMeter, LagMeter, GcMeter],
    once: Callable[[], Awaitable[object]],
    requests: Callable[[], tuple[int, int]],
) -> Row:
    """`once` run `refreshes` times: medians of its CPU, loop busy time, lag, full GCs and
    requests, and the longest GC pause of all runs."""
    meter, lag, collections = meters
    samples: list[list[float]] = [[], [], [], [], [], [], [], []]
    lag.start()
    for _ in range(refreshes):
        was, started = requests(), time.process_time()
        meter.reset()
        lag.reset()
        collections.reset()
        await once()
        cpu = time.process_time() - started
        await asyncio.sleep(2 * lag.tick_s)  # a wake-up due at the end counts here
        now = requests()
        for column, value in enumerate((cpu, meter.busy_s, lag.longest_s, collections.full,
                                        collections.longest_s, now[0] - was[0],
                                        now[1] - was[1], meter.busy_cpu_s)):  # fmt: skip
            samples[column].append(value)
    await lag.stop()
    medians = [statistics.median(column) for column in samples]
    medians[4] = max(samples[4])
    return (medians[0], medians[1], medians[2], medians[3], medians[4], medians[5], medians[6],
            medians[7])  # fmt: skip


async def measure(prom_url: str, am_url: str, refreshes: int) -> dict[str, Row]:
    results: dict[str, Row] = {}
    meters = LoopMeter(), LagMeter(), GcMeter()
    with meters[0].installed(), meters[2].installed():
        async with httpx.AsyncClient(base_url=am_url, trust_env=False, timeout=30) as raw:
            got: list[int] = []

            async def bare() -> None:
                got.append(len((await raw.get("/api/v2/alerts")).json()))

            results[BASELINE] = await runs(refreshes, meters, bare, lambda: (0, len(got)))
            print(f"Alertmanager holds {got[-1]} alerts", file=sys.stderr)
        async with PrometheusClient(prom_url, timeout=30) as prom:
            engine = AlertEngine(prom, [], source="prometheus", from_prometheus=Selection())
            await engine.refresh()
            view = AlertmanagerView(AlertmanagerClient(am_url, timeout=30), grace=None)
            am = view.client
            assert am is not None
            statuses: list[RuleStatus] = []
            for mode in ("prometheus", "steady", "new silence"):

                async def once(mode: str = mode) -> None:
                    nonlocal statuses
                    if mode == "new silence":
                        view.invalidate()  # what an unseen silence id does: the list is read again
                    if mode == "prometheus":
                        statuses = await engine.refresh()
                    else:  # the board's refresh stage: Alertmanager read beside Prometheus
                        statuses = await refresh_joined(engine, alertmanager=view)

                if mode != "prometheus":
                    await refresh_joined(engine, alertmanager=view)  # warm: connections, silences
                results[NAMES[mode]] = await runs(
                    refreshes, meters, once, lambda: (prom.requests, am.requests)
                )
            counts = [s.routing for s in statuses if s.routing is not None]
            silenced, active = sum(r.silenced for r in counts), sum(r.active for r in counts)
            print(f"routed: {silenced} silenced, {active} active of {len(counts)} firing rules")
            await view.aclose()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refreshes", type=int, default=10)
    args = parser.parse_args()
    metrics, metrics_port = serve_metrics()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        am_port, prom_port = free_loopback_port(), free_loopback_port()
        am = subprocess.Popen(alertmanager_argv(am_port, directory / "am"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        (directory / "rules.yaml").write_text(rule_file())
        config = {"global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
                  "rule_files": [str(directory / "rules.yaml")],
                  "scrape_configs": [{"job_name": "bench", "static_configs": [
                      {"targets": [f"127.0.0.1:{metrics_port}"]}]}]}  # fmt: skip
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom = subprocess.Popen(
            [shutil.which("prometheus") or "prometheus",
             f"--config.file={directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        prom_url, am_url = f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}"
        try:
            firing = lambda: len(  # noqa: E731
                httpx.get(f"{prom_url}/api/v1/alerts", timeout=30).json()["data"]["alerts"]
            )
            wait(lambda: firing() >= FIRING_RULES * PER_RULE, "5,000 alerts in Prometheus")
            wait(lambda: bool(httpx.get(f"{am_url}/-/ready").status_code == 200), "alertmanager")
            post_alerts(am_url, metrics_port)
            print("5,000 alerts held; adding silences", file=sys.stderr, flush=True)
            add_silences(am_url)
            print("silences added; measuring", file=sys.stderr, flush=True)
            results = asyncio.run(measure(prom_url, am_url, args.refreshes))
        finally:
            for proc in (prom, am):
                proc.terminate()
                proc.wait(timeout=20)
            metrics.shutdown()
    print(f"{RULES} rules ({FIRING_RULES * PER_RULE} firing instances), {SILENCED} silenced "
          f"by {SILENCES} silences (+{EXPIRED} expired), median of {args.refreshes}")  # fmt: skip
    print_rows(results)
    steady = results[NAMES["steady"]]
    requests = f"requests {steady[5]:g} to Prometheus + {steady[6]:g} to Alertmanager"
    verdict("steady state", steady[1], steady[2], requests, steady[5] == 1 and steady[6] == 1)
    return 0


def print_rows(results: dict[str, Row]) -> None:
    baseline = results[BASELINE][0]
    print(f"{'':38} {'CPU ms':>7} {'x base':>6} {'loop ms':>7} {'(CPU)':>6} {'lag ms':>6} "
          f"{'full GCs':>8} {'GC max ms':>9} {'prom':>4} {'am':>3}")  # fmt: skip
    for name, (cpu, busy, lag, full, gc_max, prom, am, busy_cpu) in results.items():
        print(f"{name:38} {cpu * 1000:7.1f} {cpu / baseline:6.1f} {busy * 1000:7.1f} "
              f"{busy_cpu * 1000:6.1f} {lag * 1000:6.1f} {full:8g} {gc_max * 1000:9.1f} "
              f"{prom:4g} {am:3g}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
