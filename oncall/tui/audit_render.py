"""What the `:audit` screen shows, as text: one record's cells, the chain's state, the status.

Pure functions of what the `AuditSource` answered (oncall.service.audit_view), so the screen
(oncall/tui/audit_screen.py) only places them. Colours are theme variables (`styled`), and
every state also has its symbol or words, so the screen reads the same with NO_COLOR.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App

from oncall.service.audit_view import AuditPage, AuditRow, ChainStatus, cut
from oncall.tui.paint import styled

COLUMNS = (
    ("seq", "Seq"),
    ("time", "Time (UTC)"),
    ("user", "User"),
    ("transition", "Transition"),
    ("action", "Action"),
    ("target", "Target"),
    ("alert", "Alert"),
    ("outcome", "Outcome"),
)
#: Long cells are cut so that one odd record does not push the others off the screen.
WIDTHS = {"target": 32, "alert": 24, "outcome": 40}

TRANSITION_COLOUR = {
    "succeeded": "success",
    "verified": "success",
    "approved": "primary",
    "started": "primary",
    "failed": "error",
    "refused": "warning",
    "declined": "warning",
    "rolled_back": "warning",
    "reverted": "error",
}


def chain_parts(chain: ChainStatus) -> list[tuple[str, str]]:
    """The chain's state as (text, theme colour) parts: intact, broken, incomplete actions."""
    records = f"{chain.count} record{'' if chain.count == 1 else 's'}"
    if not chain.ok:
        where = f" at {chain.where}" if chain.where else ""
        parts = [(f"✗ BROKEN{where}: {chain.problem}", "error")]
    elif not chain.exists:
        parts = [(f"○ no audit log yet at {chain.path}", "foreground-muted")]
    else:
        parts = [(f"✓ chain intact: {records}", "success")]
    if chain.problems > 1:
        parts.append((f"{chain.problems} problems (oncall audit verify lists them)", "error"))
    if chain.incomplete:
        count = len(chain.incomplete)
        parts.append((f"! {count} action{'' if count == 1 else 's'} incomplete", "warning"))
    # As `oncall audit verify` says it: a local chain that checks out proves little by itself.
    if chain.local_only is not None:
        parts.append((f"? local chain only: {chain.local_only}", "warning"))
    elif chain.anchor is not None:
        parts.append((f"anchor: {chain.anchor}", "foreground-muted"))
    return parts


def chain_text(app: App[Any], chain: ChainStatus | None, error: str | None) -> Text | str:
    """The chain line: the verification's parts, that it is still running, or why it failed."""
    if error is not None:
        return styled(app, f"? cannot verify the chain: {error}", "warning")
    if chain is None:
        return "… verifying the chain"
    text = Text(end="")
    for i, (part, colour) in enumerate(chain_parts(chain)):
        if i:
            text.append(" · ")
        text.append_text(styled(app, part, colour, bold=colour == "error"))
    return text


def record_cells(app: App[Any], row: AuditRow) -> list[Text]:
    """One row of the records table, in COLUMNS' order; an unreadable line all in red."""
    if row.problem is not None:
        texts = ["✗", "", "", "", "", "", "", row.outcome]
        return [styled(app, text, "error", bold=True) for text in texts]
    values = {
        "seq": str(row.seq) if row.seq is not None else "?",
        "time": row.time,
        "user": row.user,
        "transition": row.transition,
        "action": row.action,
        "target": row.target,
        "alert": row.alert,
        "outcome": row.outcome,
    }
    out = []
    for key, _ in COLUMNS:
        colour = TRANSITION_COLOUR.get(row.transition) if key == "transition" else None
        if key == "outcome" and row.outcome.startswith("guard:"):
            colour = "warning"
        out.append(styled(app, cut(values[key], WIDTHS.get(key)), colour))
    return out


def status_text(
    page: AuditPage | None, list_error: str | None, filter_text: str, query_error: str | None
) -> str:
    """The status line: how many records (match), which are shown, the filter and its error."""
    parts: list[str] = []
    if list_error is not None:
        parts.append(f"cannot read the audit log: {list_error}")
    elif page is None:
        parts.append("reading…")
    else:
        if page.matched == page.total:
            parts.append(f"{page.total} record{'' if page.total == 1 else 's'}")
        else:
            parts.append(f"{page.matched} of {page.total} records match")
        if len(page.rows) < page.matched:
            parts.append(f"newest {len(page.rows)} shown")
        parts.append("newest first")
    if filter_text:
        parts.append(f"filter {filter_text!r}")
    if query_error is not None:
        parts.append(query_error)
    return " · ".join(parts)
