"""The tests' one way to wait until a condition holds: `wait_until` (sync), `eventually`
(async) and `until` (a Textual app under a Pilot, which runs while it waits).

Polling is for state that offers nothing to await (a freshly started server that listens, a
rule a server evaluates every second, an app's screen after a key): each wait is bounded by
`within` seconds, checks every `interval` seconds, returns what the condition last returned
(when truthy), and otherwise raises AssertionError naming `what` it waited for and, when
given, what was `seen` last. A wait `watching` a server ends early once that server exited (it
will not start listening), and shows the end of its log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from textual.pilot import Pilot

T = TypeVar("T")

UNTIL_S = 15.0
"""`until`'s bound: an app under test answers in far less, even on a loaded machine."""
UNTIL_MAX_INTERVAL_S = 0.2
"""The longest pause between two looks of `until` (its pauses double from `interval`)."""


class Watched(Protocol):
    """A server a wait watches (tests/harness/processes.py's `Started`, serve's `Serve`)."""

    def exited(self) -> str | None:
        """Why waiting on it is pointless (it exited with 1), or None while it runs."""

    def log_tail(self) -> str:
        """The end of its log."""


class _Bound:
    """One wait's deadline and its failure message."""

    def __init__(self, what: str, within: float, seen: Callable[[], object] | None) -> None:
        self.what, self.within, self.seen = what, within, seen
        self.deadline = time.monotonic() + within

    def over(self) -> bool:
        return time.monotonic() >= self.deadline

    def failure(self, last: object, why: str | None = None) -> AssertionError:
        """`gave up after Ns waiting for WHAT` (or `gave up waiting for WHAT: WHY`), then
        what was seen last: `seen()` (text, such as a server's log, on lines of its own;
        anything else by repr), or else what the condition last returned when that says more
        than no (not None or a bool)."""
        if why:
            message = f"gave up waiting for {self.what}: {why}"
        else:
            message = f"gave up after {self.within:g}s waiting for {self.what}"
        if self.seen is not None:
            shown = self.seen()
            message += f"\n{shown}" if isinstance(shown, str) else f"; saw {shown!r}"
        elif last is not None and not isinstance(last, bool):
            message += f"; it last returned {last!r}"
        return AssertionError(message)


def wait_until(
    condition: Callable[[], T | None],
    *,
    within: float,
    what: str,
    interval: float = 0.02,
    seen: Callable[[], object] | None = None,
    watching: Watched | None = None,
) -> T:
    """Call `condition` until it returns something truthy and return that, or fail after
    `within` seconds (at once when the server it is `watching` exited)."""
    if watching is not None and seen is None:
        seen = watching.log_tail
    bound = _Bound(what, within, seen)
    while True:
        last = condition()
        if last:
            return last
        why = watching.exited() if watching is not None else None
        if why or bound.over():
            raise bound.failure(last, why)
        time.sleep(interval)  # the poll's interval, bounded by `within`


async def eventually(
    condition: Callable[[], Awaitable[T | None]],
    *,
    within: float,
    what: str,
    interval: float = 0.2,
    seen: Callable[[], object] | None = None,
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """Await `condition` until it returns something truthy and return that, or fail after
    `within` seconds; between tries, `pause(interval)` (a Pilot's, for `until`)."""
    bound = _Bound(what, within, seen)
    while True:
        last = await condition()
        if last:
            return last
        if bound.over():
            raise bound.failure(last)
        await pause(interval)  # the poll's interval, bounded by `within`


async def until(
    pilot: Pilot[Any],
    ok: Callable[[], object],
    what: str,
    *,
    within: float = UNTIL_S,
    interval: float = 0.01,
    seen: Callable[[], object] | None = None,
) -> None:
    """Let the app run (its pending messages, its idle loop) until `ok()` holds, for at most
    `within` seconds: `eventually` with the pilot's pause. Some answers come from worker
    threads, so the bound is time, not rounds: a loaded machine must not fail a slow thread."""

    async def holds() -> bool:
        return bool(ok())

    step = [interval]

    async def pause(_: float) -> None:
        # From `interval`, doubling up to UNTIL_MAX_INTERVAL_S: a screen after a key is seen
        # at once, and a drill test's 90 s wait does not poll the app a hundred times a second.
        await pilot.pause(step[0])
        step[0] = min(step[0] * 2, max(interval, UNTIL_MAX_INTERVAL_S))

    await eventually(holds, within=within, what=what, interval=interval, seen=seen, pause=pause)
