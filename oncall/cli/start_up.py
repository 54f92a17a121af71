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

import atexit
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


def freeze_at_exit() -> None:
    """Freeze every object when the interpreter exits, before it finalizes.

    `paused()` unfreezes when the command returns (the caller's collector as it was), and
    the interpreter's finalization then runs full collections over everything the command
    made (a check: ≈ 500,000 objects, modules included): 0.12-0.16 s of a fresh `oncall
    check` on the 2 cores, 40-50 ms of `config show`, 80-120 ms of `alerts`, spent freeing
    what the process's exit frees anyway. Frozen objects are not collected there. Nothing a
    command opens is left for a collection to finalize: its clients, files and the audit log
    are closed before it returns. In a process that calls `main()` again (the tests), the
    freeze waits for that process's own exit.
    """
    atexit.unregister(gc.freeze)  # once, however many commands a process runs
    atexit.register(gc.freeze)
