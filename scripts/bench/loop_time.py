"""Event-loop time: how long the asyncio loop ran callbacks (was blocked) while something ran.

`LoopMeter` wraps `asyncio.events.Handle._run`, the one place every callback and task step runs
on a loop, and adds up each callback's wall time (total = the loop's busy time; max = the longest
stall a key press could have waited behind). Work in threads (`asyncio.to_thread`) does not
count: the loop is free meanwhile. Patch only inside a benchmark process.
"""

from __future__ import annotations

import asyncio
import asyncio.events
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

    def reset(self) -> None:
        self.busy_s, self.longest_s, self.callbacks = 0.0, 0.0, 0

    @contextmanager
    def installed(self) -> Iterator[LoopMeter]:
        original = asyncio.events.Handle._run
        meter = self

        def timed(handle: Any) -> None:
            started = time.perf_counter()
            try:
                original(handle)
            finally:
                spent = time.perf_counter() - started
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
