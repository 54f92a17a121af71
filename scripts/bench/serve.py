"""`oncall serve` (docs/PERFORMANCE.md): notification → verdict stored, and a burst.

Starts a real redis-server and a real `python -m oncall serve` (its own settings, runbooks
written here), and posts Alertmanager-shaped notifications to it over HTTP:

1. latency: N firings one after another, each a notification of one alert whose runbook has a
   fast step (Redis INFO) and a slow one (a Prometheus that never answers, `prometheus.timeout`
   1 s: `unknown` at its timeout). Ratio per firing = (stored_at − received_at, serve's own
   timestamps) / the slowest step's duration; the median is the figure (target ≤ 1.3).
2. burst: 1,000 notifications (10 alerts × 100 instances, one instance each) posted by 20
   concurrent senders. Each answer's time is measured by the sender (target p99 ≤ 50 ms: serve
   answers before any checklist runs); then, once the queue is drained, checked + overflow
   (both from /metrics) must be 1,000 (none lost beyond the documented overflow), and serve's
   peak RSS (VmHWM) ≤ 200 MB.

    .venv/bin/python scripts/bench/serve.py [--firings 10] [--burst 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis
import yaml
from prometheus_client.parser import text_string_to_metric_families

from oncall_drill.netutil import free_loopback_port

TOKEN = "bench-token"  # noqa: S105 - the bench's own
RUNBOOK = """\
alert: {name}
title: bench runbook
steps:
  - id: redis_info
    title: Redis answers
    probe: redis.stats
    expect: facts.uptime_s != null
  - id: prom
    title: Prometheus answers (it never does here)
    probe: prometheus.query
    params:
      query: up
    expect: facts.count >= 0
"""


def wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)  # the poll's interval, bounded by `timeout`
    raise SystemExit(f"gave up waiting for {what}")


def metric(url: str, name: str, **labels: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def notification(name: str, fingerprint: str) -> dict[str, Any]:
    return {
        "version": "4", "status": "firing", "receiver": "bench", "groupKey": "{}",
        "alerts": [{
            "status": "firing", "labels": {"alertname": name, "instance": fingerprint},
            "annotations": {"summary": "bench"}, "startsAt": "2026-01-01T00:00:00Z",
            "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": fingerprint,
        }],
    }  # fmt: skip


def start(
    tmp: Path, silent: str
) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], str, str]:
    redis_port, serve_port = free_loopback_port(), free_loopback_port()
    binary = shutil.which("redis-server") or "redis-server"
    redis_proc = subprocess.Popen(
        [binary, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    runbooks = tmp / "runbooks"
    runbooks.mkdir()
    for i in range(10):
        (runbooks / f"BenchAlert{i}.yaml").write_text(RUNBOOK.format(name=f"BenchAlert{i}"))
    (tmp / "token").write_text(TOKEN)
    settings = {
        "context": {"name": "bench"},
        "prometheus": {"url": silent, "timeout": "1s"},
        "redis": {"url": redis_url, "timeout": "1s"},
        "runbooks": {"dirs": [str(runbooks)]},
        "serve": {"listen": f"127.0.0.1:{serve_port}", "token_file": str(tmp / "token")},
    }
    (tmp / "oncall.yaml").write_text(yaml.safe_dump(settings))
    serve = subprocess.Popen(
        [sys.executable, "-m", "oncall", "serve", "--config", str(tmp / "oncall.yaml")],
        stderr=(tmp / "serve.log").open("wb"),
    )
    url = f"http://127.0.0.1:{serve_port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait(healthy, 30, "oncall serve")
    return redis_proc, serve, url, redis_url


def verdicts(redis_url: str) -> list[dict[str, Any]]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        out = []
        for vid in [str(v) for v in client.zrange("oncall:verdicts", 0, -1)]:
            raw = client.hget(f"oncall:verdict:{vid}", "verdict")
            if raw:
                out.append(json.loads(str(raw)))
        return out
    finally:
        client.close()


def latency(url: str, redis_url: str, firings: int) -> list[float]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    ratios = []
    for i in range(firings):
        fingerprint = f"lat{i}"
        httpx.post(f"{url}/alertmanager/webhook", json=notification("BenchAlert0", fingerprint),
                   headers=headers, timeout=5).raise_for_status()  # fmt: skip

        def stored(fp: str = fingerprint) -> bool:
            return any(v["fingerprint"] == fp for v in verdicts(redis_url))

        wait(stored, 30, f"verdict {i}")
        verdict = next(v for v in verdicts(redis_url) if v["fingerprint"] == fingerprint)
        slowest = max(s["duration_s"] for s in verdict["steps"])
        ratios.append((verdict["stored_at"] - verdict["received_at"]) / slowest)
    return ratios


async def burst(url: str, count: int, senders: int) -> list[float]:
    """Post `count` notifications from `senders` concurrent senders (aiohttp's client: httpx's
    costs the shared two cores ~3 times the CPU a request, which the answer times would carry)."""
    import aiohttp

    headers = {"Authorization": f"Bearer {TOKEN}"}
    bodies = [notification(f"BenchAlert{i % 10}", f"burst{i}") for i in range(count)]
    times: list[float] = []
    async with aiohttp.ClientSession(headers=headers) as client:

        async def sender(mine: list[dict[str, Any]]) -> None:
            for body in mine:
                started = time.perf_counter()
                async with client.post(f"{url}/alertmanager/webhook", json=body) as answer:
                    await answer.read()
                    times.append(time.perf_counter() - started)
                    answer.raise_for_status()

        await asyncio.gather(*(sender(bodies[i::senders]) for i in range(senders)))
    return times


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--firings", type=int, default=10)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--senders", type=int, default=20, help="concurrent senders")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name, socket.socket() as silent_sock:
        silent_sock.bind(("127.0.0.1", 0))
        silent_sock.listen(512)  # accepts, never answers: the slow step
        silent = f"http://127.0.0.1:{silent_sock.getsockname()[1]}"
        redis_proc, serve, url, redis_url = start(Path(name), silent)
        try:
            ratios = latency(url, redis_url, args.firings)
            median, worst = statistics.median(ratios), max(ratios)
            print(f"latency: {len(ratios)} firings, (stored − received) / slowest step: "
                  f"median {median:.3f}, max {worst:.3f} (target ≤ 1.3)")  # fmt: skip
            times = asyncio.run(burst(url, args.burst, args.senders))
            times.sort()
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            print(f"burst: {len(times)} notifications, webhook answer median "
                  f"{statistics.median(times) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
                  f"max {times[-1] * 1000:.1f} ms (target p99 ≤ 50 ms)")  # fmt: skip

            def drained() -> bool:
                done = metric(url, "oncall_serve_checklists_total", outcome="checked")
                over = metric(url, "oncall_serve_checklists_total", outcome="overflowed")
                return bool(done + over >= args.burst + args.firings)

            wait(drained, 600, "the queue to drain")
            checked = metric(url, "oncall_serve_checklists_total", outcome="checked") - args.firings
            overflow = metric(url, "oncall_serve_checklists_total", outcome="overflowed")
            recorded = sum(v["status"] != "checked" for v in verdicts(redis_url))
            print(f"burst: checked {checked:.0f} + overflow {overflow:.0f} = "
                  f"{checked + overflow:.0f} of {args.burst}; overflow recorded as "
                  f"'not checked: overloaded': {recorded} (≤ queue_size a second)")  # fmt: skip
            print(f"serve peak RSS (VmHWM): {peak_rss_mb(serve.pid):.0f} MB (target ≤ 200 MB)")
        finally:
            serve.terminate()
            serve.wait(timeout=10)
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
