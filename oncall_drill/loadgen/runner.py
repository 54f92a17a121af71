"""The bounded load generator: the drill mix at a rate curve against the gateway's `/chat`.

`await run_load(LoadConfig(url=..., rate=..., duration_s=..., max_requests=...))` returns a
`Summary`. Every run is bounded three ways, whatever it is asked: HTTP requests
(≤ `MAX_REQUESTS`), seconds (≤ `MAX_DURATION_S`, plus one request timeout to let the last
answers land, after which stragglers are cancelled), and requests in flight
(≤ `max_in_flight`; an arrival waits for a free slot and counts as `throttled`). Targets must be
loopback `http://` URLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp

from oncall_drill.loadgen.curve import CURVES, arrival_times
from oncall_drill.loadgen.mix import MixGenerator, Scenario
from oncall_drill.loadgen.targets import require_loopback_url

MAX_REQUESTS = 100_000
MAX_DURATION_S = 3600.0
MAX_RATE = 1000.0
MAX_IN_FLIGHT = 256
MAX_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LoadConfig:
    """One run; `normalized()` validates it and applies the hard caps."""

    url: str
    rate: float
    duration_s: float
    max_requests: int
    curve: str = "constant"
    seed: int | None = None
    max_in_flight: int = 32
    timeout_s: float = 10.0
    prompt_limit: int = 4000
    path: str = "/chat"

    def normalized(self) -> tuple[LoadConfig, list[str]]:
        """(capped config, notes on what was capped); ValueError on a config that cannot run."""
        url = require_loopback_url(self.url, frozenset({"http"}))
        if self.curve not in CURVES:
            raise ValueError(f"curve must be one of {', '.join(CURVES)}, not {self.curve!r}")
        for name in ("rate", "duration_s", "timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, not {value!r}")
        if self.max_requests < 1 or self.max_in_flight < 1:
            raise ValueError("max_requests and max_in_flight must be >= 1")
        if not self.path.startswith("/"):
            raise ValueError("path must start with /")
        notes: list[str] = []
        caps = {
            "rate": MAX_RATE,
            "duration_s": MAX_DURATION_S,
            "max_requests": MAX_REQUESTS,
            "max_in_flight": MAX_IN_FLIGHT,
            "timeout_s": MAX_TIMEOUT_S,
        }
        changes: dict[str, Any] = {"url": url}
        for name, cap in caps.items():
            if getattr(self, name) > cap:
                notes.append(f"{name} capped at {cap:g} (asked {getattr(self, name):g})")
                changes[name] = type(getattr(self, name))(cap)
        return replace(self, **changes), notes


@dataclass
class Summary:
    """What a run did."""

    sent: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    scenarios_by_kind: Counter[str] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)
    throttled: int = 0
    cancelled: int = 0
    elapsed_s: float = 0.0
    stopped_by: str = "duration"
    notes: list[str] = field(default_factory=list)

    def percentile_ms(self, q: float) -> float | None:
        """Nearest-rank percentile of the answered requests' latency, in ms."""
        if not self.latencies_s:
            return None
        ordered = sorted(self.latencies_s)
        rank = max(1, math.ceil(q / 100 * len(ordered)))
        return round(ordered[rank - 1] * 1000, 3)

    def to_dict(self) -> dict[str, Any]:
        """The JSON the CLI prints."""
        return {
            "sent": self.sent,
            "answered": len(self.latencies_s),
            "by_status": dict(sorted(self.by_status.items())),
            "by_kind": dict(sorted(self.by_kind.items())),
            "scenarios_by_kind": dict(sorted(self.scenarios_by_kind.items())),
            "latency_ms": {f"p{q}": self.percentile_ms(q) for q in (50, 95, 99)},
            "throttled": self.throttled,
            "cancelled": self.cancelled,
            "elapsed_s": round(self.elapsed_s, 3),
            "stopped_by": self.stopped_by,
            "notes": self.notes,
        }


async def _send_scenario(
    client: aiohttp.ClientSession,
    config: LoadConfig,
    scenario: Scenario,
    summary: Summary,
    hard_deadline: float,
) -> None:
    """The scenario's turns, one after another; transport failures count as `error`."""
    for turn in scenario.turns:
        remaining = hard_deadline - time.monotonic()
        if remaining <= 0:
            return
        body: dict[str, Any] = {"prompt": turn.prompt, "kind": scenario.kind}
        if turn.session is not None:
            body["session"] = turn.session
        started = time.monotonic()
        timeout = aiohttp.ClientTimeout(total=min(config.timeout_s, remaining))
        try:
            async with client.post(
                f"{config.url}{config.path}", json=body, timeout=timeout
            ) as response:
                await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError):
            summary.by_status["error"] += 1
            continue
        summary.latencies_s.append(time.monotonic() - started)
        summary.by_status[str(status)] += 1


async def run_load(config: LoadConfig, client: aiohttp.ClientSession | None = None) -> Summary:
    """Run the mix against config.url; bounded in requests, seconds and concurrency."""
    config, notes = config.normalized()
    summary = Summary(notes=notes)
    mix = MixGenerator(config.seed, config.prompt_limit)
    own_client = client is None
    http = client or aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=config.max_in_flight)
    )
    slots = asyncio.Semaphore(config.max_in_flight)
    tasks: set[asyncio.Task[None]] = set()
    start = time.monotonic()
    deadline = start + config.duration_s
    hard_deadline = deadline + config.timeout_s

    async def scenario_task(scenario: Scenario) -> None:
        try:
            await _send_scenario(http, config, scenario, summary, hard_deadline)
        finally:
            slots.release()

    try:
        for offset in arrival_times(config.curve, config.rate, config.duration_s):
            delay = start + offset - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if slots.locked():
                summary.throttled += 1
            try:
                await asyncio.wait_for(
                    slots.acquire(), timeout=max(0.0, deadline - time.monotonic())
                )
            except TimeoutError:
                break
            scenario = mix.next()
            turns = scenario.turns[: config.max_requests - summary.sent]
            scenario = Scenario(scenario.kind, turns)
            summary.sent += len(turns)
            summary.by_kind[scenario.kind] += len(turns)
            summary.scenarios_by_kind[scenario.kind] += 1
            task = asyncio.create_task(scenario_task(scenario))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            if summary.sent >= config.max_requests:
                summary.stopped_by = "max_requests"
                break
        if tasks:
            _, pending = await asyncio.wait(
                set(tasks), timeout=max(0.0, hard_deadline - time.monotonic())
            )
            summary.cancelled = len(pending)
    finally:
        for task in list(tasks):
            task.cancel()
        for task in list(tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if own_client:
            await http.close()
        summary.elapsed_s = time.monotonic() - start
    return summary
