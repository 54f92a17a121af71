"""k9s-style `:` commands, the same commands in Textual's palette (ctrl+p), and the keymap.

`:` opens a one-line command prompt at the bottom of the screen: `:alerts`, `:audit`,
`:context` (`:context NAME` shows one context of several, `:context all` all of them),
`:help`, `:q`. Each command names an action of the app, so the prompt, the palette
and a key binding all run the same code. An unknown command says so and changes nothing.

The keymap setting (`keys:` in oncall.yaml) maps binding ids (shown by `?`) to keys; ids that no
binding has are reported to the user instead of being silently ignored.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Horizontal, Vertical
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Static

from oncall.settings import Settings
from oncall.settings.render import mask_url


@dataclass(frozen=True)
class Command:
    """A `:` command: its name, one line of help, and the app action it runs."""

    name: str
    help: str
    action: str

    @property
    def title(self) -> str:
        return f":{self.name}"


COMMANDS = (
    Command("alerts", "The board of golden alerts", "show_alerts"),
    Command("audit", "The audit log: records, details, chain verification", "show_audit"),
    Command(
        "context",
        "This environment: name, production, Prometheus, Kubernetes",
        "show_context",
    ),
    Command("incidents", "The team's incidents; enter opens one's timeline", "show_incidents"),
    Command("help", "The keys of this screen and their binding ids", "help"),
    Command("q", "Quit oncall", "quit"),
)
#: Other spellings a k9s or vim hand types without thinking.
ALIASES = {"alert": "alerts", "board": "alerts", "ctx": "context", "quit": "q", "q!": "q",
           "incident": "incidents"}  # fmt: skip


#: The commands that take an argument (`:context eu`); any other typed with one is unknown.
TAKES_ARGUMENT = frozenset({"context"})


def find_command(text: str) -> Command | None:
    """The command typed as ':audit', 'audit' or ' :Audit '; None when there is no such one."""
    return parse_command(text)[0]


def parse_command(text: str) -> tuple[Command | None, str]:
    """The command typed and its argument (':context eu' → context, 'eu'; else '')."""
    word, _, argument = text.strip().removeprefix(":").strip().partition(" ")
    name = ALIASES.get(word.lower(), word.lower())
    command = next((command for command in COMMANDS if command.name == name), None)
    if argument.strip() and name not in TAKES_ARGUMENT:
        return None, ""
    return command, argument.strip()


def unknown_command(text: str) -> str:
    typed = text.strip().removeprefix(":").strip()
    known = " ".join(command.title for command in COMMANDS)
    return f"unknown command :{typed} — try {known}"


class CommandLineScreen(ModalScreen[str | None]):
    """The `:` prompt, docked at the bottom; enter runs the command, esc cancels."""

    DEFAULT_CSS = """
    CommandLineScreen {
        background: transparent;
    }
    #command-bar {
        dock: bottom;
        height: 1;
        background: $panel;
    }
    #command-prompt {
        width: 2;
        padding: 0 0 0 1;
        color: $accent;
        text-style: bold;
    }
    #command-input {
        width: 1fr;
        height: 1;
        border: none;
        padding: 0;
        background: $panel;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="command.cancel"),
    ]

    def __init__(self, suggestions: Iterable[str] = ()) -> None:
        super().__init__()
        #: Completions besides the command names, e.g. `context eu` (`contexts:`).
        self.suggestions = list(suggestions)

    def compose(self) -> ComposeResult:
        names = [command.name for command in COMMANDS]
        with Horizontal(id="command-bar"):
            yield Static(":", id="command-prompt", markup=False)
            yield Input(
                placeholder=" ".join(names),
                suggester=SuggestFromList([*names, *self.suggestions], case_sensitive=False),
                id="command-input",
            )

    def on_mount(self) -> None:
        self.query_one("#command-input", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


def context_lines(settings: Settings) -> list[str]:
    """`:context` — which environment this session talks to."""
    context, kube = settings.context, settings.kubernetes
    production = "▲ yes — PRODUCTION" if context.production else "no"
    kubeconfig = str(kube.kubeconfig) if kube.kubeconfig else "default (as kubectl)"
    return [
        f"Context {context.name}",
        "",
        f"  production   {production}",
        f"  read-only    {'yes' if settings.read_only else 'no'}",
        f"  Prometheus   {mask_url(settings.prometheus.url)}",
        f"  Kubernetes   context {kube.context or '(current)'} · namespace {kube.namespace}",
        f"  kubeconfig   {kubeconfig}",
        "",
        "  esc closes",
    ]


class ContextScreen(ModalScreen[None]):
    """A small box saying which environment this is; production is framed in the error colour."""

    DEFAULT_CSS = """
    ContextScreen {
        align: center middle;
    }
    #context-box {
        width: auto;
        height: auto;
        max-width: 90%;
        padding: 1 2;
        border: round $primary;
        background: $surface;
    }
    #context-box.production {
        border: heavy $error;
    }
    #context-box Static {
        width: auto;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="context.close"),
        Binding("enter", "close", "Close", show=False, id="context.close_enter"),
    ]

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings

    def compose(self) -> ComposeResult:
        classes = "production" if self.settings.context.production else ""
        with Vertical(id="context-box", classes=classes):
            yield Static("\n".join(context_lines(self.settings)), markup=False)

    def action_close(self) -> None:
        self.dismiss()


class OncallCommands(Provider):
    """The `:` commands in the command palette (ctrl+p), under the same names."""

    def _run(self, command: Command) -> Callable[[], Awaitable[bool]]:
        return partial(self.app.run_action, command.action)

    async def discover(self) -> Hits:
        for command in COMMANDS:
            yield DiscoveryHit(command.title, self._run(command), help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in COMMANDS:
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(command.title),
                    self._run(command),
                    text=command.title,
                    help=command.help,
                )


def binding_ids(owners: Iterable[type[DOMNode]]) -> set[str]:
    """Every binding id declared by these classes (and the classes they inherit from)."""
    ids: set[str] = set()
    for owner in owners:
        for cls in owner.__mro__:
            for binding in vars(cls).get("BINDINGS", ()):
                if isinstance(binding, Binding) and binding.id:
                    ids.add(binding.id)
    return ids


def oncall_binding_owners() -> list[type[DOMNode]]:
    """The app, screens and widgets of `oncall.tui`, every module of it imported first (the
    app imports some screens only when first shown), so that a new screen's bindings count
    for the keymap without being listed anywhere."""
    import oncall.tui

    for module in pkgutil.iter_modules(oncall.tui.__path__):
        importlib.import_module(f"oncall.tui.{module.name}")
    found: list[type[DOMNode]] = []
    stack: list[type[DOMNode]] = [DOMNode]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith("oncall.tui") and cls not in found:
            found.append(cls)
    return found


def split_keymap(keys: Mapping[str, str], known: set[str]) -> tuple[dict[str, str], list[str]]:
    """The keymap to apply (ids some binding has) and the ids nobody has, sorted."""
    keymap = {binding_id: key for binding_id, key in keys.items() if binding_id in known}
    unknown = sorted(binding_id for binding_id in keys if binding_id not in known)
    return keymap, unknown


def unknown_keys_text(unknown: list[str]) -> str:
    return (
        f"keys: no binding has the id {', '.join(unknown)} — ignored; "
        "`?` lists the ids of each screen"
    )
