"""Full garbage collections at idle moments (oncall.runtime): held while input comes,
run once it stops, never held for ever; the collector's own threshold put back on exit. And
the tables' render caches kept small (oncall.tui.tables), so that each collection is short."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from textual.widgets import DataTable

from oncall.runtime import EVERY_S, HELD_THRESHOLD, IDLE_S, LONGEST_HELD_S, CollectorPacing
from oncall.tui.tables import CELL_CACHE, LINE_CACHE
from tests.harness.waiting import until
from tests.tui.fakes import FakeClock, board_app

#: The caches `new_table` bounds, and Textual's own bound of each.
CACHES = {
    "_cell_render_cache": (CELL_CACHE, 10000),
    "_row_render_cache": (LINE_CACHE, 1000),
    "_row_renderable_cache": (LINE_CACHE, 1000),
    "_line_cache": (LINE_CACHE, 1000),
}


class Pacing:
    """A pacing on a fake clock that counts the collections it asks for."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.collections = 0
        self.pacing = CollectorPacing(clock=self.clock, collect=self.collect)

    def collect(self) -> int:
        self.collections += 1
        return 0

    def after(self, seconds: float, *, typing: bool = False) -> int:
        """Let `seconds` pass in ticks of 0.5 s (with a key at each while `typing`); the
        collections run meanwhile."""
        before = self.collections
        for _ in range(round(seconds / 0.5)):
            self.clock.now += 0.5
            if typing:
                self.pacing.input()
            self.pacing.tick()
        return self.collections - before


@pytest.fixture
def paced() -> Iterator[Pacing]:
    threshold = gc.get_threshold()
    paced = Pacing()
    paced.pacing.install()
    try:
        yield paced
    finally:
        paced.pacing.uninstall()
        assert gc.get_threshold() == threshold


def test_install_takes_full_collections_over_and_uninstall_gives_them_back() -> None:
    before = gc.get_threshold()
    pacing = CollectorPacing()
    pacing.install()
    try:
        assert gc.get_threshold() == (before[0], before[1], HELD_THRESHOLD)
        pacing.install()  # twice: the threshold saved is still the collector's own
    finally:
        pacing.uninstall()
    assert gc.get_threshold() == before
    pacing.uninstall()  # twice: nothing to put back
    assert gc.get_threshold() == before


def test_a_full_collection_waits_while_keys_come_and_runs_once_they_stop(paced: Pacing) -> None:
    assert paced.after(EVERY_S + 10, typing=True) == 0
    assert paced.after(IDLE_S - 0.5) == 0
    assert paced.after(0.5) == 1
    # Then at most one per EVERY_S, however idle the user is.
    assert paced.after(EVERY_S - 1) == 0
    assert paced.after(1) == 1
    assert paced.pacing.full_collections == 2


def test_keys_without_a_pause_hold_the_collection_back_only_so_long(paced: Pacing) -> None:
    assert paced.after(LONGEST_HELD_S - 1, typing=True) == 0
    assert paced.after(1, typing=True) == 1


def test_nothing_runs_while_the_collector_is_off_or_the_pacing_not_installed(
    paced: Pacing,
) -> None:
    gc.disable()  # as oncall.cli.main does until the first frame, and the warm-up meanwhile
    try:
        assert paced.after(LONGEST_HELD_S + 10) == 0
    finally:
        gc.enable()
    paced.pacing.uninstall()
    assert paced.after(LONGEST_HELD_S + 10) == 0


async def test_the_app_paces_collections_from_its_first_frame_to_its_exit() -> None:
    before = gc.get_threshold()
    app = board_app()
    async with app.run_test() as pilot:
        await until(pilot, lambda: app.collector.installed, "the pacing installed")
        assert gc.get_threshold()[2] == HELD_THRESHOLD
        typed = app.collector.last_input
        await pilot.press("down")
        assert app.collector.last_input > typed  # a key counts as input
    assert not app.collector.installed
    assert gc.get_threshold() == before


async def test_tables_keep_fewer_rendered_cells_and_lines_than_textual_would() -> None:
    app = board_app()
    async with app.run_test():
        plain, ours = DataTable[str](), app.board.query_one("#alerts", DataTable)
        for name, (bound, textual) in CACHES.items():
            # The private names of the pinned Textual: a rename would leave ours unused.
            assert getattr(plain, name).maxsize == textual, name
            assert getattr(ours, name).maxsize == bound < textual, name
