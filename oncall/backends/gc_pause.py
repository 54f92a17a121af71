"""The garbage collector paused while a board refresh builds its objects.

A refresh of 5,000 instances allocates tens of thousands of container objects (the decoded
`/api/v1/rules` and `/api/v2/alerts` answers, instances, Alertmanager alerts, the join) and
keeps the decoded answers alive until the new states are built. With the collector on, that
many allocations start dozens of young collections, each moving the still-alive answer one
generation up, and about one full (generation 2) collection a refresh: a walk of the whole
heap that holds the interpreter lock for tens of ms, in whichever thread triggered it, the
event loop's included (docs/PERFORMANCE.md, "Alertmanager"). Paused meanwhile, the decoded
answers are freed by reference counting before any collection sees them; the young
collection that ends the pause examines only what the refresh kept (its new states), once,
in the worker thread that ends it.

Pausing only defers work: nothing is collected late but cyclic garbage made during the
pause (a refresh makes none; other threads might), which the next collection takes. The
pause is process-wide (the collector is), so it is counted: overlapping pauses (contexts
refreshing at once, the Prometheus and Alertmanager reads) end when the last one does, and
the collector is turned on again only if it was on when the first began (the app turns it
off for its start-up and on again itself).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Pause:
    """The process's count of pauses in progress (one collector, so one count)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False


_PAUSE = _Pause()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection while inside (across threads and awaits; see above)."""
    with _PAUSE.lock:
        if _PAUSE.depth == 0:
            _PAUSE.was_enabled = gc.isenabled()
            gc.disable()
        _PAUSE.depth += 1
    try:
        yield
    finally:
        with _PAUSE.lock:
            _PAUSE.depth -= 1
            resume = _PAUSE.depth == 0 and _PAUSE.was_enabled
            if resume:
                gc.enable()
        if resume:  # outside the lock: a finalizer the collection runs may pause again
            # The young collection of what the refresh kept, here in the worker thread that
            # ends the pause, not at the event loop's next allocation.
            gc.collect(0)


def paused() -> bool:
    """Whether a pause is in progress (for tests)."""
    with _PAUSE.lock:
        return _PAUSE.depth > 0
