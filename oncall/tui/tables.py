"""What the screens' tables have in common: how one is made, which row is under the cursor,
and how the `/` filter box under it is left.

The board (alerts), the incident screen (steps) and the audit screen (records) each list rows
keyed by a string (an alert name, a step id, a record id) in a row-cursor `DataTable`.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.cache import LRUCache
from textual.widgets import DataTable, Input

#: How many rendered cells, and rendered rows and lines, a table keeps (Textual's own: 10,000
#: and 1,000). Every key of those caches holds the table's update count, so each `update_cell`
#: (the incident screen's step times, once a second) leaves every entry stale, kept until the
#: cache is full: up to ~100,000 objects that every full garbage collection walks while a key
#: waits (oncall.runtime). These hold what a frame of a tall terminal shows, several
#: times. (The board's ages drop only their own entries: oncall.tui.board_table.)
CELL_CACHE = 2000
LINE_CACHE = 250


def new_table(
    table_id: str,
    columns: Iterable[tuple[str, str]],
    kind: type[DataTable[Text]] = DataTable,
    *,
    classes: str | None = None,
) -> DataTable[Text]:
    """A row-cursor table with these (column key, header) columns; `kind` a subclass of
    DataTable (the board's `CellBatchTable`)."""
    table = kind(id=table_id, cursor_type="row", classes=classes)
    # Private attributes of the pinned Textual (8.2.8); tests/tui/test_collector.py checks
    # that they are still there.
    table._cell_render_cache = LRUCache(CELL_CACHE)
    table._row_render_cache = LRUCache(LINE_CACHE)
    table._row_renderable_cache = LRUCache(LINE_CACHE)
    table._line_cache = LRUCache(LINE_CACHE)
    for key, label in columns:
        table.add_column(Text(label), key=key)
    return table


def cursor_key(table: DataTable[Text]) -> str | None:
    """The key of the row under the cursor; None when the table is empty."""
    if table.row_count == 0:
        return None
    key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    return key if isinstance(key, str) else None


def leave_filter(event: Input.Submitted, filter_text: str, table: DataTable[Text]) -> None:
    """Enter in the filter box: back to the table; an empty filter also hides the box."""
    event.stop()
    if not filter_text:
        event.input.remove_class("-shown")
    table.focus()
