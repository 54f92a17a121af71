"""Event-loop time: how long the asyncio loop ran callbacks (was blocked) while something ran.

`LoopMeter` wraps `asyncio.events.Handle._run`, the one place every callback and task step runs
on a loop, and adds up each callback's wall time (total = the loop's busy time; max = the longest
stall a key press could have waited behind). Work in threads (`asyncio.to_thread`) does not
count: the loop is free meanwhile. Patch only inside a benchmark process.
"""

from __future__ import annotations

import asyncio
import asyncio.events
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class LoopMeter:
    """Busy time and longest callback of the running event loop, in seconds."""

    busy_s: float = 0.0
    longest_s: float = 0.0
    callbacks: int = 0
    #: The loop thread's CPU time in those callbacks: what they cost without the time the OS
    #: gave the CPU to another process meanwhile (a loaded machine inflates `busy_s`).
    busy_cpu_s: float = 0.0

    def reset(self) -> None:
        self.busy_s, self.longest_s, self.callbacks, self.busy_cpu_s = 0.0, 0.0, 0, 0.0

    @contextmanager
    def installed(self) -> Iterator[LoopMeter]:
        original = asyncio.events.Handle._run
        meter = self

        def timed(handle: Any) -> None:
            started, started_cpu = time.perf_counter(), time.thread_time()
            try:
                original(handle)
            finally:
                spent = time.perf_counter() - started
                meter.busy_cpu_s += time.thread_time() - started_cpu
                meter.busy_s += spent
                meter.longest_s = max(meter.longest_s, spent)
                meter.callbacks += 1

        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        try:
            yield self
        finally:
            asyncio.events.Handle._run = original  # type: ignore[method-assign]


@dataclass
class LagMeter:
    """How late the running loop serves a timer: the longest wait a key press would have.

    `LoopMeter` counts the time callbacks run; it cannot see the loop's thread waiting for the
    GIL while a worker thread holds it (inside one long C call such as `json.loads`), which
    delays the loop just the same. This ticker asks to be woken every `tick_s` and records by
    how much each wake-up came late."""

    tick_s: float = 0.002
    longest_s: float = 0.0
    _task: asyncio.Task[None] | None = None

    def reset(self) -> None:
        self.longest_s = 0.0

    async def _tick(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.tick_s)
            self.longest_s = max(self.longest_s, time.perf_counter() - asked - self.tick_s)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        # A wake-up due during the caller's own last step is recorded first, not cancelled.
        await asyncio.sleep(2 * self.tick_s)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@dataclass
class GcMeter:
    """The garbage collections while installed: how many full (generation 2) ones, and the
    longest pause of any collection, in seconds of its thread's CPU time (a loaded machine
    would add the time the OS ran another process meanwhile). A collection runs in whichever thread
    allocates past the threshold and holds the GIL throughout: a worker thread's full
    collection of a big heap stops the event loop just the same."""

    full: int = 0
    longest_s: float = 0.0
    _started: float = 0.0

    def reset(self) -> None:
        self.full, self.longest_s = 0, 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
            return
        self.longest_s = max(self.longest_s, time.thread_time() - self._started)
        self.full += info["generation"] == 2

    @contextmanager
    def installed(self) -> Iterator[GcMeter]:
        gc.callbacks.append(self._callback)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._callback)


#: The budget of a board refresh's event-loop time (docs/PERFORMANCE.md).
BUDGET_S = 0.050


def verdict(what: str, busy_s: float, lag_s: float, requests: str, requests_ok: bool) -> bool:
    """Print whether a refresh kept to the budget; True when it did.

    "Event-loop time per refresh" is read both ways the loop can be held: its busy time
    (`LoopMeter`: callbacks run for the refresh, summed) and its lag (`LagMeter`: the longest
    a timer waited, which also counts the loop's thread waiting for the GIL while a worker
    thread or a garbage collection holds it). Each must be within `BUDGET_S`."""
    ok = busy_s <= BUDGET_S and lag_s <= BUDGET_S and requests_ok
    budget = f"{BUDGET_S * 1000:g} ms"
    print(
        f"budget: {what}: loop busy {busy_s * 1000:.1f} ms and lag {lag_s * 1000:.1f} ms "
        f"(each <= {budget}), {requests}: {'MET' if ok else 'NOT MET'}"
    )
    return ok
