"""The process's garbage collector, in one place: the only module that switches it.

Three policies, each measured (docs/PERFORMANCE.md; docs/architecture.md, §1 "Layers"):

- **Pauses** (`collector_paused`): a board refresh allocates tens of thousands of container
  objects (the decoded `/api/v1/rules` and `/api/v2/alerts` answers, instances, the join) and
  keeps the decoded answers alive until the new states are built. With the collector on, that
  many allocations start dozens of young collections, each moving the still-alive answer one
  generation up, and about one full collection a refresh: a walk of the whole heap holding the
  interpreter lock for tens of ms, in whichever thread triggered it, the event loop's
  included. Paused meanwhile, the decoded answers are freed by reference counting before any
  collection sees them; the young collection that ends the pause examines only what the
  refresh kept, once, in the worker thread that ends it. The pause is process-wide (the
  collector is), so it is counted: overlapping pauses (contexts refreshing at once, the
  warm-up beside them) end when the last one does, and the collector is turned on again only
  if it was on when the first began.
- **Start-up and exit freezes**: a fresh command (`start_up_paused`, `start_up_done`) and the
  app (`collector_off` before its first frame, `collector_on` after it) make objects by the
  hundred thousand that live as long as the process: the collector is off meanwhile and what
  exists then is frozen; `freeze_at_exit` spares the interpreter's finalization the full
  collections over what the process's exit frees anyway; `frozen_after` freezes the modules a
  warm-up imports.
- **Idle pacing** (`CollectorPacing`): while the app runs, full collections (20-40 ms of
  Textual's render caches) run at idle moments instead of in the middle of a key press.
"""

from __future__ import annotations

import atexit
import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# --- pauses -----------------------------------------------------------------------------------


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


@contextmanager
def frozen_after() -> Iterator[None]:
    """A pause (counted with the refreshes') whose objects are frozen at its end: module
    objects a warm-up imports live as long as the process, and a full collection in the middle
    of the imports would walk hundreds of thousands of them holding the interpreter lock."""
    with collector_paused():
        try:
            yield
        finally:
            gc.freeze()


# --- start-up and exit ------------------------------------------------------------------------

_start_up = {"paused": False}


@contextmanager
def start_up_paused() -> Iterator[None]:
    """The collector off until `start_up_done()` or the end of the block; when the block
    ends, everything as before: nothing frozen, the collector as the caller had it (tests call
    `main()` in their own process)."""
    was_enabled = gc.isenabled()
    gc.disable()
    _start_up["paused"] = was_enabled
    try:
        yield
    finally:
        _start_up["paused"] = False
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def start_up_done() -> None:
    """Freeze what start-up made and turn the collector back on, if `start_up_paused()`
    turned it off (a fresh check: before its event loop runs the checklist)."""
    if _start_up["paused"]:
        _start_up["paused"] = False
        gc.freeze()
        gc.enable()


def freeze_at_exit() -> None:
    """Freeze every object when the interpreter exits, before it finalizes.

    `start_up_paused()` unfreezes when the command returns, and the interpreter's
    finalization then runs full collections over everything the command made (a check:
    ≈ 500,000 objects, modules included): 0.12-0.16 s of a fresh `oncall check` on two cores,
    spent freeing what the process's exit frees anyway. Nothing a command opens is left for a
    collection to finalize: its clients, files and the audit log are closed before it
    returns. In a process that calls `main()` again (the tests), the freeze waits for that
    process's own exit.
    """
    atexit.unregister(gc.freeze)  # once, however many commands a process runs
    atexit.register(gc.freeze)


def collector_off() -> None:
    """The app's start-up (imports, CSS, the first compose): the collector walks those
    objects again and again, a seventh of the time to the first frame on two cores."""
    gc.disable()


def collector_on() -> None:
    """After the app's first frame; a no-op where it was never off (tests, embedding)."""
    gc.enable()


# --- idle pacing ------------------------------------------------------------------------------

#: No input for this long: the user is reading, not typing; a full collection may run.
IDLE_S = 2.0
#: At most one full collection in this long (CPython's own pace here: every 20-40 s).
EVERY_S = 30.0
#: Input without a pause for this long (a key held down): the collection runs anyway.
LONGEST_HELD_S = 120.0
#: How often the app calls `tick`.
TICK_S = 0.5
#: A generation-2 threshold no run reaches: counted in generation-1 collections (a few a second).
HELD_THRESHOLD = 2**30


class CollectorPacing:
    """Full collections at the app's idle moments instead of the collector's own.

    While the app runs, the collector never starts a full collection on its own (its
    generation-2 threshold is out of reach; the young generations are collected as before,
    each well under a millisecond); `tick` runs one instead, once no key or mouse input came
    for `IDLE_S`, at most every `EVERY_S`, and in any case after `LONGEST_HELD_S`: the same
    work, at a moment nobody is waiting (`scripts/bench/tui.py`, part 2). Textual does the
    like during smooth scrolling (`App.PAUSE_GC_ON_SCROLL`). The threshold is put back when
    the app exits."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        collect: Callable[[], object] = gc.collect,
    ) -> None:
        self._clock = clock
        self._collect = collect
        self._saved: tuple[int, int, int] | None = None
        self.last_input = self.last_full = clock()
        self.full_collections = 0

    @property
    def installed(self) -> bool:
        return self._saved is not None

    def install(self) -> None:
        """Take full collections over from the collector (until `uninstall`)."""
        if self._saved is None:
            self._saved = gc.get_threshold()
            young, middle, _ = self._saved
            gc.set_threshold(young, middle, HELD_THRESHOLD)
            self.last_full = self._clock()

    def uninstall(self) -> None:
        """The collector's own thresholds again."""
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None

    def input(self) -> None:
        """A key or mouse event came: the user may be waiting for the next frame."""
        self.last_input = self._clock()

    def due(self) -> bool:
        now = self._clock()
        if now - self.last_full < EVERY_S:
            return False
        return now - self.last_input >= IDLE_S or now - self.last_full >= LONGEST_HELD_S

    def tick(self) -> None:
        """Run a full collection when one is due (on the event loop: nobody is typing)."""
        # Not while collection is off: start-up (`collector_off`) and warm-up pause it.
        if self.installed and gc.isenabled() and self.due():
            self._collect()
            self.last_full = self._clock()
            self.full_collections += 1
