"""The app's one terminal-safety rule: no control character of any text drawn reaches the driver.

Every line every widget renders passes Textual's line filters on its way to the compositor
(`App.get_line_filters`, the hook Textual's own NO_COLOR filter uses), so this is the single
boundary between what a backend says and what the terminal is told: a rule name, a label, an
annotation, a step summary, an Alertmanager silence comment or an audit record with an escape
sequence in it (OSC 0 window title, OSC 52 clipboard write, `ESC[2J`, the C1 CSI `\\x9b`, NUL)
is drawn as text, each control character shown as "?", the rule the CLI applies
(`oncall.redaction.terminal_safe`) and the board's cells apply before layout.

A control character has no width to Rich, so "?" makes the line one cell longer than its
widget laid it out: the line is cut back to its width (the last cells of a line are padding
in practice). So the panes that show a backend's text also apply the rule before layout
(`safe_text`: the board's cells through `oncall.tui.paint.styled`, the incident screen, the
instances panel, the confirm modal, the audit screen's details), where "?" takes its cell;
the filter is what holds for any text a pane forgets.

Cost: one C-level `str.isprintable` per segment; Textual caches a strip's filtered form, so
only lines that changed pay even that (scripts/bench/tui.py's key-press figures).
"""

from __future__ import annotations

from typing import TypeVar

from rich.segment import Segment
from rich.text import Text
from textual.color import Color
from textual.filter import LineFilter

from oncall.redaction import terminal_safe

_Shown = TypeVar("_Shown", str, Text)


class TerminalSafe(LineFilter):
    """Replaces the C0 controls (but tab), DEL and the C1 controls in segment text by "?"."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        # isprintable() is False for every control character (and for a few harmless
        # separators such as NBSP, which then take the slow path and come out unchanged).
        if all(segment.control or segment.text.isprintable() for segment in segments):
            return segments
        width = Segment.get_line_length(segments)
        cleaned = [
            segment
            if segment.control or segment.text.isprintable()
            else Segment(terminal_safe(segment.text), segment.style, segment.control)
            for segment in segments
        ]
        return Segment.adjust_line_length(cleaned, width)


def safe_text(content: _Shown) -> _Shown:
    """`content` with its control characters as "?" before layout (spans and styles kept:
    one character for one)."""
    if isinstance(content, str):
        return terminal_safe(content)
    plain = content.plain
    cleaned = terminal_safe(plain)
    if cleaned == plain:
        return content
    copy = content.copy()
    copy.plain = cleaned
    return copy
