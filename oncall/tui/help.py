"""`?`: the keys of the screen underneath and of the app, each with its binding id.

The ids are the names the `keys` setting remaps (Textual's `App.set_keymap`); a remapped
binding is listed with the key it has now.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


def key_lines(
    bindings: Iterable[BindingType],
    display: Callable[[Binding], str],
    keymap: Mapping[str, str] | None = None,
) -> list[str]:
    """'  /        Filter         board.filter' for each binding that has a description, with
    the key `keymap` gives its id, if any (the first, when it gives several: 'f1,ctrl+h')."""
    lines = []
    for binding in bindings:
        if not isinstance(binding, Binding) or not binding.description:
            continue
        remapped = (keymap or {}).get(binding.id or "")
        shown = binding
        if remapped:
            first = remapped.split(",")[0].strip()
            shown = dataclasses.replace(binding, key=first, key_display=None)
        key = display(shown)
        lines.append(f"  {key:<8} {binding.description:<14} {binding.id or ''}")
    return lines


class HelpScreen(ModalScreen[None]):
    """A box listing the keys; esc, ? or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="help.close"),
        Binding("question_mark", "close", "Close", show=False, id="help.close_again"),
    ]

    def __init__(
        self,
        title: str,
        screen: Iterable[BindingType],
        app: Iterable[BindingType],
        keymap: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.heading = title
        self.screen_bindings = list(screen)
        self.app_bindings = list(app)
        self.keymap = dict(keymap or {})

    def compose(self) -> ComposeResult:
        display = self.app.get_key_display
        lines = [f"Keys — {self.heading}", ""]
        lines += key_lines(self.screen_bindings, display, self.keymap)
        lines += ["", *key_lines(self.app_bindings, display, self.keymap)]
        lines += ["", "  esc closes this help"]
        with Vertical(id="help-box"):
            yield Static("\n".join(lines), markup=False)

    def action_close(self) -> None:
        self.dismiss()
