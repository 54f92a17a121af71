"""The garbage collector's full collections, held back while the user is typing (issue 15.2).

A full (generation 2) collection walks every object that survived two younger collections,
holding the interpreter lock throughout: the event loop, and the key press it was about to
answer, wait for it. While the app runs, most of those objects are Textual's render caches
(the board's `DataTable` keeps up to 10,000 rendered cells and 1,000 lines, each a few
objects, and every `update_cell` — the ages, once a second — makes a new set): 50,000–100,000
objects and 20–40 ms of CPU for each full collection, a few times a minute, which is the rare
key press over 50 ms (`scripts/bench/tui.py`, part 2, diagnosed with `tui_stalls.py`). What
`gc.freeze()` did for the imports (`LiveChecklists.warm_up`) cannot be done for caches that
keep changing.

So while the app runs, the collector never starts a full collection on its own (its
generation-2 threshold is out of reach; the young generations are collected as before, each
well under a millisecond); `CollectorPacing.tick` runs one instead, once no key or mouse input
came for `IDLE_S`, at most every `EVERY_S`, and in any case after `LONGEST_HELD_S` — the same
work, at a moment nobody is waiting. Textual does the like during smooth scrolling
(`App.PAUSE_GC_ON_SCROLL`). The threshold is put back when the app exits.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

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
    """Full collections at the app's idle moments instead of the collector's own."""

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
        # Not while collection is off: start-up (oncall.cli.main) and warm-up pause it.
        if self.installed and gc.isenabled() and self.due():
            self._collect()
            self.last_full = self._clock()
            self.full_collections += 1
