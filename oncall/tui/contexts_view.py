"""The board across several contexts (`contexts:`): its Context column, `:context NAME`, and
the header that names what is shown.

Without `--context` the board shows every context at once: a Context column after State,
rows sorted firing-first across them (`AlertBook.ordered`). `:context NAME` narrows the board
to one context and the header names it (production in the error colour); `:context all`
widens it again; `:context` alone still shows the settings box. The alert rows keep their keys
(`eu/LLMHighP99Latency`), so what an alert leads to stays in its context whichever view shows
it.
"""

from __future__ import annotations

from oncall.model.alerts import RuleStatus
from oncall.settings import Settings

#: The word `:context` takes to show every context again.
ALL = "all"


def board_contexts(settings: Settings) -> list[str]:
    """The contexts the board shows rows of; empty when it shows one (no Context column)."""
    if settings.contexts and settings.selected_context is None:
        return list(settings.contexts)
    return []


def with_context_column(
    columns: tuple[tuple[str, str], ...], settings: Settings
) -> tuple[tuple[str, str], ...]:
    """The board's columns, with Context after State when several contexts are shown."""
    if not board_contexts(settings):
        return columns
    return (columns[0], ("context", "Context"), *columns[1:])


def context_cell(settings: Settings, status: RuleStatus) -> tuple[str, str | None, bool]:
    """The Context cell: its name, in the error colour for a production context."""
    entry = settings.contexts.get(status.context)
    return (status.context, "error" if entry is not None and entry.production else None, False)


def settings_of(settings: Settings, context: str) -> Settings:
    """The settings an alert of `context` is handled with ("" : the app's own)."""
    return settings.for_context(context) if context in settings.contexts else settings


def header_text(settings: Settings, view: str | None) -> tuple[str, bool]:
    """The header line for the board's view, and whether it is framed as production."""
    names = board_contexts(settings)
    if view is not None or not names:
        shown = settings_of(settings, view or "").context
        if shown.production:
            return f"▲ PRODUCTION ▲  context {shown.name}  ▲ PRODUCTION ▲", True
        return f"oncall · context {shown.name}", False
    production = [n for n in names if settings.contexts[n].production]
    marks = f"  ▲ PRODUCTION: {', '.join(production)} ▲" if production else ""
    return f"oncall · all contexts: {', '.join(names)}{marks}", bool(production)


def command_suggestions(settings: Settings) -> list[str]:
    """What the `:` prompt completes `context …` to."""
    names = board_contexts(settings)
    return [*(f"context {name}" for name in names), f"context {ALL}"] if names else []


def parse_view(settings: Settings, argument: str) -> str | None:
    """The view `:context ARGUMENT` asks for: a context name, or None for all; ValueError
    naming the contexts when there is no such one."""
    names = board_contexts(settings)
    if argument == ALL and names:
        return None
    if argument in names:
        return argument
    known = ", ".join([*names, ALL]) if names else "none: this board shows one context"
    raise ValueError(f"no context {argument!r} on this board; the contexts: {known}")
