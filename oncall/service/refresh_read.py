"""A side read of a board refresh: one per refresh, started beside Prometheus' request and
taken when the rules' statuses are joined to it (Alertmanager's alerts, the acknowledgements).

`start` when the Prometheus request starts; `take` when its statuses are ready. The read
started for this refresh is the one taken, even when it is done already (no second request);
`take` starts one itself when no `start` came since the last `take` (the CLI). It waits at
most `grace` seconds for it (None: until the read ends, bounded by its client's timeout).
A read still running then is taken at the next refresh, and what `take` gives meanwhile is
said to be stale: the latest read done before it (None before any), never passed off as this
refresh's. A late read that ends between two refreshes is kept as the latest one done when
the next starts, not dropped unseen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Taken(Generic[T]):
    """What `take` gives: a read's value (None: no read done yet) and whether it is this
    refresh's read (`current`) or the latest one done before it, this one still running."""

    value: T | None
    current: bool


class RefreshRead(Generic[T]):
    """At most one read in flight; the latest one done. Subclasses say what a read is."""

    def __init__(self, *, grace: float | None) -> None:
        self.grace = grace  # None: wait for the whole read (the CLI), bounded by its timeout
        self._task: asyncio.Task[T] | None = None
        self._started = False  # a read started since the last take: the one to take
        self._done: T | None = None  # the latest read done

    def _read(self) -> Coroutine[Any, Any, T]:
        """One read. Expected failures are values (a snapshot or an error that says so)."""
        raise NotImplementedError

    def start(self) -> None:
        """Start a read unless one is in flight (call it when the Prometheus refresh starts)."""
        if self._task is None or self._task.done():
            self._keep_done()
            self._task = asyncio.create_task(self._read())
            self._started = True

    async def take(self) -> Taken[T]:
        """This refresh's read, waited for at most `grace` seconds (see the module)."""
        if not self._started:
            self.start()
        self._started = False
        task = self._task
        assert task is not None  # start made one
        if not task.done():
            await asyncio.wait([task], timeout=self.grace)
        if task.done():
            self._keep_done()
            return Taken(self._done, current=True)
        return Taken(self._done, current=False)

    def _keep_done(self) -> None:
        task = self._task
        if task is not None and task.done() and not task.cancelled():
            self._done = task.result()

    async def aclose(self) -> None:
        """Cancel a read in flight."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
