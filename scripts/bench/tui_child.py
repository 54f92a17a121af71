"""The bench's child processes (one start-up; a soak's in tui_soak.py) and the apps' frame clock.

A frame is the moment Textual hands a screen update to its driver: `App._display`, the call
that writes to the terminal when there is one. The apps here override that private method to
see it, and nothing public does the same in Textual 8.2.8: under the headless driver (the
start-up runs, `run_test`) `_display` returns before it writes anything, so a custom driver
(`driver_class`, `Driver.write`) is never called and `run_async(headless=True)` replaces it with
`HeadlessDriver` anyway; the public signals are for layout refreshes, themes and screen changes,
not for every update; and `call_after_refresh` runs once the screen is idle again, later than
the frame and only when asked for one. `is_frame` holds the one test of private state.

Only the standard library at module level: a child process's start-up is what part 1 of
`tui.py` measures. Textual and oncall are imported where they are used.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scripts.bench.tui_common import HEIGHT, RUN_DEADLINE_S, WIDTH, rss_mb

if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual.app import App
    from textual.screen import Screen


def is_frame(app: App[Any], renderable: RenderableType | None) -> bool:
    """True when `_display` got an update it passes on (not one held back by a batch)."""
    return renderable is not None and not app._batch_count


class FrameLog:
    """When Textual handed the driver a screen update, and a waiter for a particular one."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.live: float | None = None
        self.count = 0
        self.waiter: tuple[Callable[[], bool], asyncio.Future[float]] | None = None

    def frame(self, live: bool) -> bool:
        """Record a frame; True when it is the first live one."""
        now = time.monotonic()
        self.count += 1
        if self.first is None:
            self.first = now
        if self.waiter is not None:
            wanted, future = self.waiter
            if not future.done() and wanted():
                future.set_result(time.perf_counter())
        if live and self.live is None:
            self.live = now
            return True
        return False


def timed_oncall(settings: Any, log: FrameLog, *, exit_when_live: bool) -> Any:
    """`OncallApp` telling `log` of every frame; live once the board holds alert states."""
    import oncall.tui.app

    class TimedOncall(oncall.tui.app.OncallApp):
        # Textual reads CSS_PATH next to the module of the class: point it at the app's.
        CSS_PATH = str(Path(oncall.tui.app.__file__).with_name("oncall.tcss"))

        def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
            super()._display(screen, renderable)
            frame = is_frame(self, renderable)
            if frame and log.frame(live=bool(self.book.statuses)) and exit_when_live:
                self.exit()

    return TimedOncall(settings)


def child_startup(kind: str, target: str, out: Path) -> None:
    """One start-up: `kind` oncall (target: a config file) or bare (target: Prometheus URL)."""
    headless = not sys.stdout.isatty()
    log = FrameLog()
    if kind == "oncall":
        from oncall.cli.main import prepare_app_start

        prepare_app_start()  # as `oncall` does before it loads the settings
        from oncall.settings.loader import load_settings

        app = timed_oncall(load_settings(config=Path(target)).settings, log, exit_when_live=True)
    else:
        app = bare_app(target, log, exit_when_live=headless)
    asyncio.run(_run_bounded(app, headless))
    out.write_text(json.dumps({"first": log.first, "live": log.live, "rss_mb": rss_mb()}))


async def _run_bounded(app: Any, headless: bool) -> None:
    async def deadline() -> None:
        await asyncio.sleep(RUN_DEADLINE_S)
        app.exit()

    # Not an auto_pilot: run_async waits for that to finish even after the app exited.
    stop = asyncio.ensure_future(deadline())
    try:
        await app.run_async(headless=headless, size=(WIDTH, HEIGHT) if headless else None)
    finally:
        stop.cancel()


def bare_app(prometheus: str, log: FrameLog, *, exit_when_live: bool) -> Any:
    """The baseline: a Textual app with one Static that shows the rules' states once fetched.

    On a terminal it stays up until `q` (the parent sends it once it saw the states).
    """
    from textual.app import App, ComposeResult
    from textual.binding import Binding, BindingType
    from textual.widgets import Static

    class Bare(App[None]):
        BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit")]
        fetched = False

        def compose(self) -> ComposeResult:
            yield Static("waiting", id="states")

        def on_mount(self) -> None:
            self.run_worker(self.fetch(), exit_on_error=False)

        async def fetch(self) -> None:
            # In a thread, as the app defers its own heavy imports: not in the first frame's way.
            httpx = await asyncio.to_thread(importlib.import_module, "httpx")
            async with httpx.AsyncClient(base_url=prometheus, timeout=5, trust_env=False) as c:
                body = (await c.get("/api/v1/rules", params={"type": "alert"})).json()
            states = [r["state"] for g in body["data"]["groups"] for r in g["rules"]]
            self.query_one("#states", Static).update(" ".join(states))
            self.fetched = True

        def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
            super()._display(screen, renderable)
            if is_frame(self, renderable) and log.frame(live=self.fetched) and exit_when_live:
                self.exit()

    return Bare()


def child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tui.py _child")
    parser.add_argument("mode", choices=("oncall", "bare", "soak"))
    parser.add_argument("target")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--rerun", type=float, default=60.0)
    parser.add_argument("--trace-growth", type=int, default=0, help="sites to report (0: off)")
    parser.add_argument("--trace-from", type=float, default=60.0)
    parser.add_argument("--trace-base", type=float, default=120.0)
    parser.add_argument("--trace-report", type=Path)
    args = parser.parse_args(argv)
    if args.mode == "soak":
        from scripts.bench.tui_soak import Tracing, child_soak

        tracing = Tracing(args.trace_growth, args.trace_from, args.trace_base, args.trace_report)
        child_soak(args.target, args.seconds, args.rerun, args.out, tracing)
    else:
        child_startup(args.mode, args.target, args.out)
    return 0
