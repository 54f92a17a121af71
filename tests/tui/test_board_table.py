"""The board's table (oncall.tui.board_table): a batch of changed cells renders only those
cells again, and the table then shows what Textual's own `update_cell` would have shown: the
new text in the changed cells, the rest unchanged, a column grown (or shrunk) to fit, a row
scrolled into view later. And the private parts of Textual it relies on, pinned."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import textual
from rich.text import Text
from textual import messages
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.renderables.styled import Styled
from textual.screen import Screen
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowKey

from oncall.tui.board_table import CellBatchTable, CellChange
from oncall.tui.format import duration
from oncall.tui.tables import new_table
from tests.harness.waiting import until
from tests.tui.fakes import T0, FakeAlerts, FakeClock, make_app, shown, status

COLUMNS = (("name", "Name"), ("age", "Age"), ("note", "Note"))
ROWS = 30  # the window shows 9 of them under the header: the others are out of view


def row(i: int) -> tuple[Text, Text, Text]:
    return Text(f"row{i:02}"), Text(f"{i}s"), Text("ok")


class TwoTables(App[None]):
    """Ours and a plain DataTable with the same rows, one above the other, the same size:
    the plain one, given the same changes through `update_cell`, is what ours must show."""

    CSS = "DataTable { height: 10; }"

    def compose(self) -> ComposeResult:
        yield new_table("ours", COLUMNS, CellBatchTable)
        yield new_table("plain", COLUMNS)

    def on_mount(self) -> None:
        for table in self.query(DataTable):
            for i in range(ROWS):
                table.add_row(*row(i), key=f"r{i:02}")
        self.set_focus(None)  # neither shows the focused cursor's style

    @property
    def ours(self) -> CellBatchTable:
        return self.query_one("#ours", CellBatchTable)

    @property
    def plain(self) -> DataTable[Text]:
        return self.query_one("#plain", DataTable)

    def change(self, changes: list[tuple[str, str, str, bool]], *, plain: bool = True) -> None:
        """The same changes to both tables: ours in one batch, the plain one cell by cell
        (unless not `plain`: then `change_plain` later)."""
        self.ours.update_cells([(r, c, Text(v), fit) for r, c, v, fit in changes])
        if plain:
            self.change_plain(changes)

    def change_plain(self, changes: list[tuple[str, str, str, bool]]) -> None:
        for r, c, v, fit in changes:
            self.plain.update_cell(r, c, Text(v), update_width=fit)


async def settled(pilot: Pilot[None]) -> None:
    await pilot.pause()  # idle: the widths fitted, the repaint done
    await pilot.pause()


@contextlib.asynccontextmanager
async def two_tables() -> AsyncIterator[tuple[TwoTables, Pilot[None]]]:
    """The two tables on a 60x20 screen, their rows shown."""
    app = TwoTables()
    async with app.run_test(size=(60, 20)) as pilot:
        await settled(pilot)
        yield app, pilot


class Renders:
    """Counts the cells the app renders through rich (DataTable renders a cell as a `Styled`
    with the console's `render_lines`, which its padding calls again; a cached cell is not
    rendered again)."""

    def __init__(self, app: App[None], monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        render_lines = app.console.render_lines

        def counted(renderable: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += isinstance(renderable, Styled)
            return render_lines(renderable, *args, **kwargs)

        monkeypatch.setattr(app.console, "render_lines", counted)


async def test_a_batch_renders_only_its_cells_and_shows_them_the_rest_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with two_tables() as (app, pilot):
        before = shown(app.ours)
        assert before == shown(app.plain)
        assert before[2].split() == ["row01", "1s", "ok"]  # the header, then row 0
        renders = Renders(app, monkeypatch)
        app.change([("r01", "age", "11s", True), ("r03", "note", "no", True)], plain=False)
        await settled(pilot)
        assert renders.count == 2  # the two cells, nothing else
        after = shown(app.ours)
        assert after[2].split() == ["row01", "11s", "ok"]
        assert after[4].split() == ["row03", "3s", "no"]
        assert [line for y, line in enumerate(after) if y not in (2, 4)] == [
            line for y, line in enumerate(before) if y not in (2, 4)
        ]
        # What the batch saves: Textual's own update of one cell renders the whole window.
        renders.count = 0
        app.plain.update_cell("r01", "age", Text("11s"), update_width=True)
        await settled(pilot)
        assert renders.count >= 3 * 10  # every cell of the header and the nine rows shown
        app.plain.update_cell("r03", "note", Text("no"), update_width=True)
        await settled(pilot)
        assert shown(app.ours) == shown(app.plain)


async def test_a_cell_wider_than_its_column_grows_the_column_for_every_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with two_tables() as (app, pilot):
        wide = "a much longer age"
        changes = [("r02", "age", wide, True), ("r04", "age", "40s", True)]
        renders = Renders(app, monkeypatch)
        app.change(changes, plain=False)
        await settled(pilot)
        # The cells of the wider column shown, its header's and nine rows'; the others'
        # renders kept (each line composed again from them).
        assert renders.count == 10
        app.change_plain(changes)
        await settled(pilot)
        ours = shown(app.ours)
        assert app.ours.columns[ColumnKey("age")].content_width == len(wide)
        assert wide in ours[3]
        # Every row's note moved right with the wider column, the header's too.
        notes = {line.index("ok") for line in ours[1:] if "ok" in line}
        assert notes == {ours[0].index("Note")}
        assert ours == shown(app.plain)
        # And back: the widest cell narrower again, the column shrinks to its cells.
        app.change([("r02", "age", "2s", True)])
        await settled(pilot)
        assert app.ours.columns[ColumnKey("age")].content_width == len("Age")
        assert shown(app.ours) == shown(app.plain)


class LayoutsAsked:
    """The widgets that asked the screen for a layout (`messages.Layout`, posted at idle by a
    widget whose layout reactive changed): a layout reflows and repaints the whole screen."""

    def __init__(self, screen: Screen[Any], monkeypatch: pytest.MonkeyPatch) -> None:
        self.widgets: list[Any] = []
        post = screen.post_message

        def counted(message: Any) -> bool:
            if isinstance(message, messages.Layout):
                self.widgets.append(message.widget)
            return post(message)

        monkeypatch.setattr(screen, "post_message", counted)

    def of(self, widget: Any) -> int:
        return sum(asked is widget for asked in self.widgets)


def screen_lines(app: TwoTables) -> tuple[list[str], list[str]]:
    """What the screen shows of each table (ours above, the plain one below, 10 lines each)."""
    lines = [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]
    return lines[:10], lines[10:20]


async def test_a_column_grown_within_the_tables_width_repaints_it_without_a_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 15.2: the board's findings widening when the first checklist ends must not lay
    out the whole screen; Textual's own path (the plain table) does."""
    async with two_tables() as (app, pilot):
        layouts = LayoutsAsked(app.screen, monkeypatch)
        app.change([("r02", "note", "a much longer note", True)])
        await settled(pilot)
        assert layouts.of(app.plain) >= 1  # the same change through update_cell lays out
        assert layouts.of(app.ours) == 0
        assert app.ours.virtual_size.width == app.plain.virtual_size.width > 30
        assert "a much longer note" in shown(app.ours)[3]
        assert shown(app.ours) == shown(app.plain)
        ours, plain = screen_lines(app)
        assert ours == plain and "a much longer note" in ours[3]
        app.change([("r02", "note", "ok", True)])  # and narrower again
        await settled(pilot)
        assert layouts.of(app.ours) == 0
        assert shown(app.ours) == shown(app.plain)


async def test_a_column_grown_past_the_tables_width_shows_a_scrollbar_through_a_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with two_tables() as (app, pilot):
        layouts = LayoutsAsked(app.screen, monkeypatch)
        wide = "a note far wider than the sixty columns of this screen, and then some"
        app.change([("r02", "note", wide, True)])
        await settled(pilot)

        def scrollbars() -> tuple[bool, bool]:
            return app.ours.show_horizontal_scrollbar, app.plain.show_horizontal_scrollbar

        assert scrollbars() == (True, True)
        assert layouts.of(app.ours) >= 1  # the scrollbar's own layout
        assert shown(app.ours) == shown(app.plain)
        app.change([("r02", "note", "ok", True)])
        await settled(pilot)
        assert scrollbars() == (False, False)
        assert shown(app.ours) == shown(app.plain)


async def test_a_table_whose_width_follows_its_content_still_lays_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with two_tables() as (app, pilot):
        app.ours.styles.width = "auto"
        await settled(pilot)
        layouts = LayoutsAsked(app.screen, monkeypatch)
        app.change([("r02", "note", "a much longer note", True)], plain=False)
        await settled(pilot)
        assert layouts.of(app.ours) >= 1
        assert "a much longer note" in shown(app.ours)[3]


async def test_a_row_out_of_view_shows_its_new_text_once_scrolled_to() -> None:
    async with two_tables() as (app, pilot):
        app.change([("r25", "note", "late", True), ("r00", "note", "first", True)])
        await settled(pilot)
        assert shown(app.ours)[1].split() == ["row00", "0s", "first"]
        for table in (app.ours, app.plain):
            table.move_cursor(row=25, animate=False)
        await settled(pilot)
        ours = shown(app.ours)
        assert ["row25", "25s", "late"] in [line.split() for line in ours]
        assert ours == shown(app.plain)


async def test_rows_just_added_and_a_cursor_on_the_changed_row_show_the_new_text() -> None:
    """Before the table measured its new rows (at idle), a batch takes Textual's own path;
    the cursor's row is rendered apart (its cells in the cursor's style) and changes too."""
    async with two_tables() as (app, pilot):
        for table in (app.ours, app.plain):
            table.move_cursor(row=1, animate=False)
        await settled(pilot)
        app.change([("r01", "age", "61s", True)])
        await settled(pilot)
        assert shown(app.ours)[2].split() == ["row01", "61s", "ok"]
        for table in (app.ours, app.plain):
            table.add_row(Text("row30"), Text("30s"), Text("new"), key="r30")
        app.change([("r30", "note", "newer", True), ("r00", "age", "0.5s", True)])
        await settled(pilot)
        assert app.ours.get_cell("r30", "note").plain == "newer"
        assert shown(app.ours) == shown(app.plain)


async def test_an_unknown_cell_is_refused_and_nothing_of_the_batch_written() -> None:
    async with two_tables() as (app, _):
        batch: list[CellChange] = [
            ("r01", "age", Text("11s"), True),
            ("nope", "age", Text("x"), False),
        ]
        with pytest.raises(CellDoesNotExist, match="nope"):
            app.ours.update_cells(batch)
        with pytest.raises(CellDoesNotExist, match="nope"):
            app.ours.update_cells([("r01", "nope", Text("x"), False)])
        assert app.ours.get_cell("r01", "age").plain == "1s"


async def test_the_board_shows_each_rows_new_age_scrolled_to_and_filtered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = [f"Rule{i:02}" for i in range(30)]
    severity = {n: "chat" if i % 2 else "page" for i, n in enumerate(names)}
    alerts, clock = FakeAlerts(), FakeClock()
    app = make_app(alerts, clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.board.query_one("#alerts", CellBatchTable)

        async def ticked(seconds: float, rows: int) -> None:
            """Each alert firing for `seconds` plus its number, refreshed; `rows` shown."""
            clock.now = T0 + seconds
            alerts.statuses = [
                status(n, "firing", firing_for=seconds + i, severity=severity[n])
                for i, n in enumerate(names)
            ]
            before = alerts.calls
            app.refresh_alerts_now()
            await until(pilot, lambda: alerts.calls > before, "a refresh")
            await until(pilot, lambda: table.row_count == rows, f"{rows} rows")
            await settled(pilot)

        def firing_for() -> dict[str, str]:
            """Each alert shown, with its When, read off the table's lines."""
            lines = [line.split() for line in shown(table) if line.lstrip().startswith("●")]
            return {words[2]: " ".join(words[3:6]) for words in lines}

        def expected(seconds: int) -> dict[str, str]:
            return {n: f"firing for {duration(seconds + int(n[4:]))}" for n in firing_for()}

        await ticked(60, 30)
        renders = Renders(app, monkeypatch)
        await ticked(61, 30)  # the same rows: the ages updated in place
        first = firing_for()
        assert len(first) >= 5 and first == expected(61)
        # Of each row shown, its When and its Evaluated ("1m04s ago"), no other cell.
        assert renders.count == 2 * len(first)
        table.move_cursor(row=29, animate=False)  # rows out of view until now
        await settled(pilot)
        last = firing_for()
        assert set(last) - set(first) and last == expected(61)
        await pilot.press("slash", *'severity="chat"', "enter")
        await ticked(62, 15)
        await ticked(121, 15)
        seen = firing_for()
        assert seen and seen == expected(121)
        assert all(severity[n] == "chat" for n in seen)


async def test_textual_is_the_version_whose_private_parts_the_board_table_uses() -> None:
    """oncall.tui.board_table reads and drops entries of DataTable's private caches by the
    layout of their keys in Textual 8.2.8. A new Textual: re-read `_render_cell`,
    `_render_line_in_row`, `_get_row_renderables`, `_render_line` and `update_cell` in
    textual/widgets/_data_table.py, then update the module and this test."""
    assert textual.__version__ == "8.2.8"
    async with two_tables() as (app, _):
        table = app.ours
        for name in ("_data", "_row_locations", "_column_locations", "_new_rows",
                     "_updated_cells", "_y_offsets", "_update_column_widths"):  # fmt: skip
            assert hasattr(table, name), name
        rows = set(table.rows) | {table._header_row_key}
        columns = set(table.columns)
        cells = list(table._cell_render_cache.keys())
        assert cells and all(key[0] in rows and key[1] in columns for key in cells)
        lines_in_rows = list(table._row_render_cache.keys())
        assert lines_in_rows and all(key[0] in rows and key[1] == 0 for key in lines_in_rows)
        renderables = list(table._row_renderable_cache.keys())
        count = table._update_count
        # (update count, row index): those of earlier counts stay until they are pushed out.
        assert renderables and max(key[0] for key in renderables) == count, renderables
        assert all(-1 <= key[1] < ROWS for key in renderables), renderables
        lines = list(table._line_cache.keys())
        assert lines and all(key[0] in range(table.size.height) for key in lines)
        assert table._y_offsets[0] == (RowKey("r00"), 0)
        # Why the table exists: Textual's update_cell makes every cached render stale.
        table.update_cell("r00", "age", Text("x"))
        assert table._update_count == count + 1
