"""Part 3 of `tui.py` (`--contexts-hung`; docs/PERFORMANCE.md): one of two contexts hung.

Two contexts on one board: `live` (the bench prometheus; Redis, vLLM and Kubernetes at ports
nobody listens on) and `hung` (Prometheus, Redis, vLLM and the Kubernetes API at loopback
listeners that accept and never answer; its refresh times out every 2 s and starts again).
Once both contexts have rows (hung's `unknown`), a hung alert is opened (its checklist's
probes hang), then down/up is pressed, in rounds of `presses`, until at least
MIN_REFRESHES of live's refreshes came in while pressing. Key press to repaint is timed as
in part 2 (tui_keys.press_loop); live's refreshes by when each one returned to its loop.
Reference, measured first in the same run: the same board with neither context hung (`live`
and `twin`, both the bench prometheus: as many rows, two refresh loops), the same presses, so
that what the hung context costs shows apart from what two contexts' rows cost; baseline:
the bare DataTable app with as many rows.

Verdict: p99 <= 50 ms and no press missed (docs/PERFORMANCE.md, the budget of part 2), and live "on
time": no gap between its refreshes while pressing (the last one before the first press to
the last press included) longer than two refresh intervals, i.e. none late by a whole one.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from pathlib import Path
from typing import Any

from scripts.bench.tui_backends import SilentListeners, closed_ports, write_config
from scripts.bench.tui_child import FrameLog
from scripts.bench.tui_common import HEIGHT, WIDTH
from scripts.bench.tui_keys import board_after_incident, keys_bare, p99, press_loop

P99_BUDGET_S = 0.050
MIN_REFRESHES = 10
REFRESH_S = 1.0  # alerts.refresh in write_config's settings
PRESS_DEADLINE_S = 120.0  # bounded: rounds of presses stop here even if live never refreshed


class RefreshClock:
    """When each context's refreshes returned (or raised) to the app's refresh loop."""

    def __init__(self) -> None:
        self.ends: dict[str, list[float]] = {}

    def wrap(self, app: Any) -> None:
        for context, source in app.alerts_sources.items():
            source.refresh = self._timed(context, source.refresh)

    def _timed(self, context: str, refresh: Any) -> Any:
        ends = self.ends.setdefault(context, [])

        async def timed() -> Any:
            try:
                return await refresh()
            finally:
                ends.append(time.monotonic())

        return timed


def _has_rows(app: Any, context: str) -> bool:
    return any(key.startswith(f"{context}/") for key in app.book.statuses)


def _first_row_of(app: Any, context: str) -> int:
    keys = [key for key, _ in app.board.rows()]
    return next(i for i, key in enumerate(keys) if key.startswith(f"{context}/"))


async def contexts_oncall(config: Path, presses: int, contexts: tuple[str, ...]) -> dict[str, Any]:
    """Press on the board of `contexts`, with the first alert of the last one opened."""
    log, clock = FrameLog(), RefreshClock()
    board = board_after_incident(
        config,
        log,
        ready=lambda app: all(_has_rows(app, context) for context in contexts),
        pick=lambda app: _first_row_of(app, contexts[-1]),
        prepare=clock.wrap,
    )
    async with board as (app, pilot, table):
        latencies: list[float] = []
        missed = 0
        started = time.monotonic()
        while time.monotonic() - started < PRESS_DEADLINE_S:
            more, lost = await press_loop(pilot, log, lambda: table.cursor_row, presses)
            latencies += more
            missed += lost
            if sum(t > started for t in clock.ends["live"]) >= MIN_REFRESHES:
                break
        ended = time.monotonic()
        states = {
            context: {s.state for k, s in app.book.statuses.items() if k.startswith(f"{context}/")}
            for context in contexts
        }
        rows = table.row_count
    live = clock.ends["live"]
    # From the last refresh before the first press to the last press: the open end counts.
    window = [t for t in live if t <= started][-1:]
    window += [*(t for t in live if started < t <= ended), ended]
    return {
        "latencies": latencies,
        "missed": missed,
        "rows": rows,
        "seconds": ended - started,
        "refreshes": sum(started < t <= ended for t in live),
        "gaps": [b - a for a, b in itertools.pairwise(window)],
        "hung_ends": sum(started < t <= ended for t in clock.ends.get("hung", [])),
        "states": states,
    }


def part_contexts(directory: Path, prometheus: str, presses: int) -> bool:
    """Run the part and print its table and verdict; True when within the budgets."""
    # The reference: the same two contexts' rows, neither hung (`twin`: the same prometheus).
    twins = {"live": None, "twin": (prometheus, closed_ports())}
    healthy = write_config(
        directory / "twins.yaml", prometheus, closed_ports(), directory, contexts=twins
    )
    reference = asyncio.run(contexts_oncall(healthy, presses, ("live", "twin")))
    with SilentListeners(4) as silent:
        both = {"live": None, "hung": silent.backends()}
        config = write_config(
            directory / "contexts.yaml", prometheus, closed_ports(), directory, contexts=both
        )
        result = asyncio.run(contexts_oncall(config, presses, ("live", "hung")))
        held = silent.accepted
    states = result["states"]
    if states["hung"] != {"unknown"} or "unknown" in states["live"] or not result["hung_ends"]:
        # Not the situation the part is about: nothing it measured would mean anything.
        raise SystemExit(f"contexts: expected live known and hung unknown (timing out): {states}")
    bare = asyncio.run(keys_bare(result["rows"], presses))
    return report(reference, result, held, bare)


def report(
    reference: dict[str, Any], result: dict[str, Any], held: int, bare: tuple[list[float], int]
) -> bool:
    values, gaps, interval = result["latencies"], result["gaps"], REFRESH_S
    print(
        f"key press to repaint, one of two contexts hung: down/up on the board ({WIDTH}x{HEIGHT})"
        f" while context `live` refreshes every {interval:g} s; hung: {held} connections held"
        f" unanswered, {result['hung_ends']} refreshes timed out while pressing"
    )
    print(
        f"{'':34} {'presses':>7} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99 x base':>10}"
        f" {'missed':>6} {'live refreshes, gap med/max s':>30}"
    )
    base = p99(bare[0])
    rows: list[tuple[str, list[float], int, dict[str, Any] | None]] = [
        ("baseline: bare app + DataTable", bare[0], bare[1], None),
        (
            f"oncall, live + twin ({reference['rows']} rows)",
            reference["latencies"],
            reference["missed"],
            reference,
        ),
        (f"oncall, live + hung ({result['rows']} rows)", values, result["missed"], result),
    ]
    for name, got, lost, run in rows:
        live = (
            f"{run['refreshes']:>4} in {run['seconds']:3.0f} s, "
            f"{statistics.median(run['gaps']):.2f}/{max(run['gaps']):.2f}"
            if run
            else ""
        )
        print(
            f"{name:34} {len(got):7d} {statistics.median(got) * 1000:7.1f} "
            f"{p99(got) * 1000:7.1f} {max(got) * 1000:7.1f} {p99(got) / base:10.2f} {lost:6d} "
            f"{live:>30}"
        )
    keys_ok = p99(values) <= P99_BUDGET_S and result["missed"] == 0
    on_time = max(gaps) <= 2 * interval and result["refreshes"] >= MIN_REFRESHES
    print(
        f"verdict: {'PASS' if keys_ok and on_time else 'FAIL'} (keys with hung: p99 "
        f"{p99(values) * 1000:.1f} ms <= {P99_BUDGET_S * 1000:.0f} ms and none missed: "
        f"{'yes' if keys_ok else 'NO'}; live on time: longest gap {max(gaps):.2f} s <= "
        f"{2 * interval:g} s over >= {MIN_REFRESHES} refreshes: {'yes' if on_time else 'NO'})"
    )
    print()
    return keys_ok and on_time
