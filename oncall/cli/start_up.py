"""The garbage collector paused while a headless command starts, and what it made frozen.

A fresh `oncall check` imports ≈ 480 modules, builds the settings' and the runbook's models
and compiles its expressions: objects by the hundred thousand that live as long as the
process. With the collector on, those allocations start a young collection every 700
objects, each moving survivors up, and full collections that walk all of them again: ≈ 0.1 s
of a fresh check's CPU on 2 cores (docs/PERFORMANCE.md, issue 15). The app does the same for
its first frame (`oncall.cli.main.prepare_app_start`).

`paused()` wraps a command; the command calls `start_up_done()` where its start-up ends
(the check: before its event loop runs the checklist): what exists then is frozen (moved
where the collector never looks; reference counting still frees it) and the collector runs
again for what the run makes. When the command returns, everything is as before: nothing
frozen, the collector as the caller had it (tests call `main()` in their own process).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_state = {"paused": False}


@contextmanager
def paused() -> Iterator[None]:
    """The collector off until `start_up_done()` or the end of the block."""
    was_enabled = gc.isenabled()
    gc.disable()
    _state["paused"] = was_enabled
    try:
        yield
    finally:
        _state["paused"] = False
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def start_up_done() -> None:
    """Freeze what start-up made and turn the collector back on, if `paused()` turned it off."""
    if _state["paused"]:
        _state["paused"] = False
        gc.freeze()
        gc.enable()
