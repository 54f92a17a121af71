"""Colour for table cells and panes, taken from the app's theme (never a hard-coded colour).

DataTable cells are Rich `Text`, which cannot name theme variables, so the colour of a theme
variable is looked up at render time; with NO_COLOR, Textual's filter greys it out and the
symbols next to it still tell the states apart.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App
from textual.color import Color, ColorParseError

from oncall.redaction import terminal_safe


def styled(app: App[Any], text: str, colour: str | None = None, *, bold: bool = False) -> Text:
    """`text` in the colour of theme variable `colour` (e.g. 'error'), plain text otherwise;
    its control characters shown as "?" (`terminal_safe`: the text may be a backend's)."""
    parts = []
    if bold:
        parts.append("bold")
    if colour is not None:
        resolved = theme_colour(app, colour)
        if resolved:
            parts.append(resolved)
    return Text(terminal_safe(text), style=" ".join(parts), end="")


def theme_colour(app: App[Any], name: str) -> str | None:
    """The theme variable `name` as an opaque '#rrggbb' (alpha blended over the background)."""
    variables = app.theme_variables
    try:
        colour = Color.parse(variables.get(name, ""))
        background = Color.parse(variables.get("background", "#000000"))
    except ColorParseError:
        return None
    return (background + colour).hex6
