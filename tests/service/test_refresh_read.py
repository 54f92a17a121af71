"""`RefreshRead`, the per-refresh side read of the Alertmanager and acknowledgement views: the
read started beside Prometheus' request is the one taken, a read still running is taken at
the next refresh and what is shown meanwhile is marked stale, and a late read is not lost."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from oncall.service.refresh_read import RefreshRead, Taken


class Reads(RefreshRead[int]):
    """Reads that end when the test says so: read n gives n."""

    def __init__(self, grace: float | None) -> None:
        super().__init__(grace=grace)
        self.started = 0
        self.release: list[asyncio.Event] = []

    def _read(self) -> Coroutine[Any, Any, int]:
        self.started += 1
        event = asyncio.Event()
        self.release.append(event)
        return self._wait(event, self.started)

    async def _wait(self, event: asyncio.Event, n: int) -> int:
        await event.wait()
        return n


async def ended(reads: Reads) -> None:
    """Until the read in flight is done."""
    assert reads._task is not None
    await asyncio.wait([reads._task], timeout=10)


async def test_the_read_started_beside_prometheus_is_taken_even_when_done() -> None:
    reads = Reads(grace=None)
    reads.start()
    reads.release[0].set()
    await ended(reads)  # the read runs to its end before the join asks for it
    assert await reads.take() == Taken(1, current=True)
    assert reads.started == 1  # not a second read
    task = asyncio.ensure_future(reads.take())  # the next take starts its own (no `start`)
    await asyncio.sleep(0)  # one step: it starts read 2 and waits for it
    reads.release[1].set()
    assert await task == Taken(2, current=True)
    assert reads.started == 2


async def test_a_read_still_running_is_stale_then_taken_late_and_not_lost() -> None:
    reads = Reads(grace=0.01)
    reads.start()
    assert await reads.take() == Taken(None, current=False)  # nothing done yet: said so
    reads.start()  # the next refresh: read 1 still in flight, no second one
    assert reads.started == 1
    reads.release[0].set()
    assert await reads.take() == Taken(1, current=True)  # the late one, at this refresh
    reads.start()
    assert await reads.take() == Taken(1, current=False)  # read 2 runs: read 1, as stale
    reads.release[1].set()
    await ended(reads)  # read 2 ends between two refreshes, nobody waiting for it
    reads.start()  # read 3 starts; read 2 is kept as the latest done, not dropped
    assert reads.started == 3
    assert await reads.take() == Taken(2, current=False)
    await reads.aclose()
