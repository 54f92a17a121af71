"""A `DataTable` whose batch of changed cells costs only those cells to render again.

The board's ages tick once a second ("stale 5s", "firing for 3m02s"). `DataTable.update_cell`
bumps the table's `_update_count`, and that count is part of the key of every render cache
(cells, row lines, row renderables, screen lines): after one changed age the table renders
every visible cell through rich again, 27–45 ms of event-loop CPU a second on an 80x24 board
(scripts/bench/tui_slow_callbacks.py) that a key press waits behind (docs/PERFORMANCE.md).
`CellBatchTable.update_cells` writes the new values, forgets only the cache entries of the
changed cells and of their rows' lines, and repaints those rows; a column whose width changes
("stale 9s" to "stale 10s") costs its own cells and every line (composed again from the cached
cells of the other columns).

A column that grows or shrinks changes the table's virtual width, a reactive that lays out the
whole screen (13–17 ms on the board when the first checklist's steps time out and its findings
widen, stacked with the tick and a key press: docs/PERFORMANCE.md). A table whose own width does not
follow its content needs no layout for that unless a scrollbar comes or goes, which lays out
by itself (`show_horizontal_scrollbar` is a layout reactive): `_update_dimensions` then
updates the scrollbars and repaints the table instead.

Written against Textual 8.2.8 (pyproject pins it). It relies on these private parts of
`textual.widgets._data_table.DataTable`; tests/tui/test_board_table.py fails when they change:

- `_data[row_key][column_key]`: the cell values (what `update_cell` writes);
- `_row_locations`, `_column_locations`: key <-> index (`TwoWayDict.get`);
- `_update_column_widths(cells)`: Textual's own fitting of columns to cells (run at idle by
  `update_cell(update_width=True)`), here run at once;
- `_update_dimensions(new_rows)`: run at idle, ends by setting `virtual_size`; then
  `_layout_required` (set by that reactive) and `_scroll_update(virtual_size)` (the scrollbars);
- `_update_count`: left alone (it keys every cache; `update_cell` bumps it);
- `_new_rows`, `_updated_cells`: widths still to be fitted at idle (then the plain path);
- the cache keys: `_cell_render_cache` (row key, column key, …), `_row_render_cache`
  (row key, line in row, …), `_row_renderable_cache` (update count, row index),
  `_line_cache` (y of the line, header included, …); `_y_offsets` (row key, line) per line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.widget import Widget
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, CellKey, ColumnKey, RowKey

#: One changed cell: row key, column key, the new value, and whether its column is fitted to it
#: (`update_cell`'s `update_width`).
CellChange = tuple[str, str, Text, bool]


class CellBatchTable(DataTable[Text]):
    """A row table with `update_cells`: a batch of changes repainted cell by cell."""

    def update_cells(self, changes: Iterable[CellChange]) -> None:
        """Write each change; render again only the changed cells and their rows' lines.

        Raises CellDoesNotExist (writing nothing) when a row or column key is unknown."""
        batch = [(RowKey(row), ColumnKey(col), value, fit) for row, col, value, fit in changes]
        for row_key, column_key, _, _ in batch:
            if row_key not in self._row_locations or column_key not in self._column_locations:
                raise CellDoesNotExist(
                    f"No cell exists for row_key={row_key.value!r}, "
                    f"column_key={column_key.value!r}."
                )
        if not batch:
            return
        if not self._cheap_path_holds(batch):
            for row_key, column_key, value, fit in batch:
                self.update_cell(row_key, column_key, value, update_width=fit)
            return
        for row_key, column_key, value, _ in batch:
            self._data[row_key][column_key] = value
        fitted = {CellKey(row, column) for row, column, _, fit in batch if fit}
        widths = {key: column.content_width for key, column in self.columns.items()}
        if fitted:
            # Textual's own fitting (a narrower widest cell measures its whole column), now
            # rather than at idle: the repaint below must see the widths it renders with.
            self._update_column_widths(fitted)
        resized = {
            key for key, column in self.columns.items() if column.content_width != widths[key]
        }
        self._forget({(row, column) for row, column, _, _ in batch}, resized)

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """Textual's own measuring; a change of width alone, on a table whose width does not
        follow its content, repaints the table rather than laying out the screen."""
        pending, before = self._layout_required, self.virtual_size
        super()._update_dimensions(new_rows)
        if pending or not self._width_alone_changed(before, self.virtual_size):
            return
        self._layout_required = False
        # The scrollbars' thumbs follow the new width; one that comes or goes lays out.
        self._scroll_update(self.virtual_size)
        self.refresh()

    def _width_alone_changed(self, before: Size, after: Size) -> bool:
        """Only the virtual width changed, and the table's own width is not its content's:
        neither it nor a container above it is `width: auto` (a container measuring its
        children counts a fraction as auto too)."""
        if after.width == before.width or after.height != before.height:
            return False
        nodes = self.ancestors_with_self
        return not any(isinstance(node, Widget) and node.styles.is_auto_width for node in nodes)

    def _cheap_path_holds(self, batch: list[tuple[RowKey, ColumnKey, Text, bool]]) -> bool:
        """Cell by cell only on a mounted table whose rows and widths are settled, and whose
        changed rows have a fixed height (an auto-height row's height follows its cells)."""
        if not self.is_mounted or self._new_rows or self._updated_cells:
            return False
        return not any(self.rows[row].auto_height for row, _, _, _ in batch)

    def _forget(self, cells: set[tuple[RowKey, ColumnKey]], resized: set[ColumnKey]) -> None:
        """Drop the render cache entries these cells are in; repaint their rows' lines. With
        `resized` columns, every cell of those (the header's too) and every line: the cells of
        the other columns stay as they were rendered (a cell's render depends on its own
        column's width only).

        Each cache is walked once (a few thousand keys at most: oncall.tui.tables bounds
        them), far cheaper than rendering a screenful of cells through rich."""
        rows = {row for row, _ in cells}
        indices = {self._row_locations.get(row) for row in rows}
        _discard(self._cell_render_cache, lambda key: key[:2] in cells or key[1] in resized)
        _discard(self._row_renderable_cache, lambda key: key[1] in indices)
        if resized:
            self._row_render_cache.clear()
            self._line_cache.clear()
            self.refresh()
            return
        header = self.header_height if self.show_header else 0
        lines = {header + y for y, (row, _) in enumerate(self._y_offsets) if row in rows}
        _discard(self._row_render_cache, lambda key: key[0] in rows)
        _discard(self._line_cache, lambda key: key[0] in lines)
        # As DataTable's refresh_row, a line at a time: only lines in the window repaint; the
        # others render from the emptied caches when they scroll into view.
        window, width = self.window_region, max(self.size.width, self.virtual_size.width)
        shown = [Region(0, y, width, 1) for y in sorted(lines)]
        regions = [line.translate(-self.scroll_offset) for line in shown if window.overlaps(line)]
        if regions:
            self.refresh(*regions)


def _discard(cache: LRUCache[Any, Any], stale: Callable[[Any], bool]) -> None:
    """Drop the entries of `cache` whose key is `stale` (the keys copied first: a cache has
    no iterator of its own, and its dict must not change while it is walked)."""
    for key in [key for key in cache.keys() if stale(key)]:  # noqa: SIM118 - no __iter__
        cache.discard(key)
