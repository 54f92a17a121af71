"""The soak's child process (`tui.py _child soak`): the app headless for minutes, sampled.

Every SAMPLE_EVERY_S a JSON line: RSS, what the board holds, the workers, the objects the
collector tracks, and the app's refreshes (`RefreshLog`: how many, how many failed and why,
how long they took). With `--trace-growth N` the child also traces Python's allocations
(tracemalloc, from `--trace-from` seconds on) and writes the N allocation sites that grew
most between a snapshot at `--trace-base` seconds and one at the end (`trace_report`): the
memory a soak gains, by the line of code that allocated it. Tracing slows the app and adds
to its RSS: a run with it diagnoses, its RSS figures do not count.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.bench.tui_common import HEIGHT, SAMPLE_EVERY_S, WIDTH, rss_mb

if TYPE_CHECKING:
    from textual.pilot import Pilot

#: Frames kept per traced allocation: enough to see which caller of a library allocates.
TRACE_FRAMES = 12
#: Reasons of failed refreshes kept verbatim (the rest are counted as "other").
REASONS_KEPT = 8


@dataclass
class Tracing:
    """When to start tracing and take the base snapshot, and how many sites to report."""

    top: int = 0
    start_s: float = 60.0
    base_s: float = 120.0
    report: Path | None = None


@dataclass
class RefreshLog:
    """The app's refreshes as the soak saw them: counts, why each failed one failed (the
    exception, or the first stale rule's error: what the engine records), and their walls."""

    refreshes: int = 0
    failed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    walls: list[float] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)

    def wrap(self, sources: dict[str, Any]) -> None:
        """Count every `refresh` of these sources (the app's `alerts_sources`)."""
        for source in sources.values():
            source.refresh = self._counted(source.refresh)

    def _counted(self, refresh: Callable[[], Any]) -> Callable[[], Any]:
        async def counted() -> Any:
            started = time.monotonic()
            self.starts.append(started)
            try:
                statuses = await refresh()
            except BaseException as exc:
                self._failed(f"raised {type(exc).__name__}: {exc}")
                raise
            finally:
                self.refreshes += 1
                self.walls.append(time.monotonic() - started)
            stale = [s for s in statuses if s.stale_since is not None]
            if stale:
                self._failed(f"{len(stale)} stale, e.g. {stale[0].key}: {stale[0].error}")
            return statuses

        return counted

    def _failed(self, reason: str) -> None:
        self.failed += 1
        if reason in self.reasons or len(self.reasons) < REASONS_KEPT:
            self.reasons[reason[:300]] += 1
        else:
            self.reasons["other"] += 1

    def row(self) -> dict[str, Any]:
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:], strict=False)]
        return {
            "refreshes": self.refreshes,
            "failed": self.failed,
            "reasons": dict(self.reasons),
            "refresh_s_max": round(max(self.walls, default=0.0), 2),
            "refresh_s_mean": round(sum(self.walls) / len(self.walls), 2) if self.walls else 0,
            "gap_s_mean": round(sum(gaps) / len(gaps), 2) if gaps else 0,
        }


def child_soak(config: str, seconds: float, rerun_s: float, out: Path, tracing: Tracing) -> None:
    """Run the app headless for `seconds`, writing a sample every SAMPLE_EVERY_S to `out`;
    every `rerun_s` the checklists of the firing alerts are started again (an operator's `r`)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from oncall.settings.loader import load_settings
    from oncall.tui.app import OncallApp

    app = OncallApp(load_settings(config=Path(config)).settings)
    log = RefreshLog()
    log.wrap(app.alerts_sources)
    base: tracemalloc.Snapshot | None = None

    async def soak(pilot: Pilot[Any]) -> None:
        nonlocal base
        started = time.monotonic()
        next_rerun = started + rerun_s
        with out.open("w") as samples:
            while (elapsed := time.monotonic() - started) < seconds:
                if tracing.top and elapsed >= tracing.start_s and not tracemalloc.is_tracing():
                    tracemalloc.start(TRACE_FRAMES)
                if tracing.top and elapsed >= tracing.base_s and base is None:
                    base = snapshot()
                book = app.book
                firing = [n for n, s in book.statuses.items() if s.state == "firing"]
                row = {
                    "t": round(elapsed, 1),
                    "rss_mb": round(rss_mb(), 2),
                    "alerts": len(book.statuses),
                    "firing": len(firing),
                    "runs": book.generation,
                    "workers": len(app.workers),
                    "objects": len(gc.get_objects()),
                    # Whether the board still holds the fleet (a refresh that fails keeps
                    # the last instances, marked stale), and how many refreshes failed.
                    "instances": sum(len(s.instances) for s in book.statuses.values()),
                    "stale": sum(s.stale_since is not None for s in book.statuses.values()),
                    **log.row(),
                }
                samples.write(json.dumps(row) + "\n")
                samples.flush()
                if rerun_s and time.monotonic() >= next_rerun:
                    for name in firing:
                        app.start_checklist(name)
                    next_rerun += rerun_s
                await asyncio.sleep(min(SAMPLE_EVERY_S, max(0.0, seconds - elapsed)))
        if base is not None and tracing.report is not None:
            tracing.report.write_text(trace_report(base, snapshot(), tracing.top))
        app.exit()

    asyncio.run(app.run_async(headless=True, size=(WIDTH, HEIGHT), auto_pilot=soak))


def snapshot() -> tracemalloc.Snapshot:
    """The traced allocations now, after a full collection (what is garbage does not count),
    without tracemalloc's own."""
    gc.collect()
    return tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )


def trace_report(base: tracemalloc.Snapshot, end: tracemalloc.Snapshot, top: int) -> str:
    """The `top` lines of code whose live allocations grew most from base to end, then the
    `top` tracebacks that did (who called the library that allocates)."""
    lines = [f"top {top} growing allocation sites (tracemalloc, base -> end):"]
    for stat in end.compare_to(base, "lineno")[:top]:
        frame = stat.traceback[0]
        lines.append(
            f"  {stat.size_diff / 2**20:+8.2f} MB {stat.count_diff:+8d} blocks  "
            f"{frame.filename}:{frame.lineno}"
        )
    lines.append(f"top {top} growing tracebacks (the allocating line last):")
    for stat in end.compare_to(base, "traceback")[:top]:
        lines.append(f"  {stat.size_diff / 2**20:+8.2f} MB {stat.count_diff:+8d} blocks")
        lines.extend(f"      {f.filename}:{f.lineno}" for f in stat.traceback)
    return "\n".join(lines) + "\n"
