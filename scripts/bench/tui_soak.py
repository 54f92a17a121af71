"""The soak's child process (`tui.py _child soak`): the app headless for minutes, sampled.

Every SAMPLE_EVERY_S a JSON line: RSS, what the board holds, the workers, where the memory
is (`heap_row`), and the app's refreshes (`RefreshLog`: how many, how many failed and why,
how long they took). With `--trace-growth N` the child also traces Python's allocations
(tracemalloc, from `--trace-from` seconds on) and writes the N allocation sites that grew
most between a snapshot at `--trace-base` seconds and one at the end (`trace_report`): the
memory a soak gains, by the line of code that allocated it. Tracing slows the app and adds
to its RSS: a run with it diagnoses, its RSS figures do not count.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import os
import sys
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

#: Frames kept per traced allocation: which caller of a library allocates (each frame more
#: slows every allocation: at 12 a fleet soak barely ran).
TRACE_FRAMES = 4
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
    base_mb = (0.0, 0.0)  # (RSS, traced) at the base snapshot

    async def soak(pilot: Pilot[Any]) -> None:
        nonlocal base, base_mb
        started = time.monotonic()
        next_rerun = started + rerun_s
        with out.open("w") as samples:
            while (elapsed := time.monotonic() - started) < seconds:
                if tracing.top and elapsed >= tracing.start_s and not tracemalloc.is_tracing():
                    tracemalloc.start(TRACE_FRAMES)
                if tracing.top and elapsed >= tracing.base_s and base is None:
                    base = snapshot()
                    base_mb = (rss_mb(), tracemalloc.get_traced_memory()[0] / 2**20)
                book = app.book
                firing = [n for n, s in book.statuses.items() if s.state == "firing"]
                row = {
                    "t": round(elapsed, 1),
                    "rss_mb": round(rss_mb(), 2),
                    "alerts": len(book.statuses),
                    "firing": len(firing),
                    "runs": book.generation,
                    "workers": len(app.workers),
                    # Whether the board still holds the fleet (a refresh that fails keeps
                    # the last instances, marked stale), and how many refreshes failed.
                    "instances": sum(len(s.instances) for s in book.statuses.values()),
                    "stale": sum(s.stale_since is not None for s in book.statuses.values()),
                    **log.row(),
                    **heap_row(),
                }
                samples.write(json.dumps(row) + "\n")
                samples.flush()
                if rerun_s and time.monotonic() >= next_rerun:
                    for name in firing:
                        app.start_checklist(name)
                    next_rerun += rerun_s
                await asyncio.sleep(min(SAMPLE_EVERY_S, max(0.0, seconds - elapsed)))
        if base is not None and tracing.report is not None:
            end = snapshot()
            traced = tracemalloc.get_traced_memory()[0] / 2**20
            header = (
                f"from {tracing.base_s:g} s to the end: RSS {base_mb[0]:.1f} -> {rss_mb():.1f} MB,"
                f" Python's traced allocations {base_mb[1]:.1f} -> {traced:.1f} MB\n"
            )
            tracing.report.write_text(header + trace_report(base, end, tracing.top))
        app.exit()

    asyncio.run(app.run_async(headless=True, size=(WIDTH, HEIGHT), auto_pilot=soak))


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")
    ]  # fmt: skip


def heap_row() -> dict[str, float]:
    # Not `gc.get_objects()` (the soak counted the collector's objects so): it hands out
    # references to every tracked object, a tuple still being built by `tuple(generator)` in
    # a worker thread too, and that build then fails ("SystemError: Objects/tupleobject.c:927:
    # bad argument to internal function", CPython gh-107137): the soak failed refreshes of its
    # own. Counting allocated blocks hands out no reference.
    """Where the RSS is, cheaply: Python's live small-object blocks, and glibc malloc's heap
    in use, free but kept (fragmentation, or arenas of worker threads), and mmapped; {}
    without glibc. RSS that grows with `malloc_free_mb` and not with live memory is the
    allocator keeping freed memory, not a leak of objects."""
    row: dict[str, float] = {"py_blocks": sys.getallocatedblocks()}
    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return row
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    mb = 2**20
    row["malloc_used_mb"] = round(info.uordblks / mb, 1)
    row["malloc_free_mb"] = round(info.fordblks / mb, 1)
    row["malloc_mmap_mb"] = round(info.hblkhd / mb, 1)
    return row


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
