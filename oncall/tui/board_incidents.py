"""The board's incident rows: the alerts one incident groups, as one row with their count and
shared cause, expandable to the alerts' own rows (`space` or `enter` on it).

Pure row arrangement, no widgets: the board (oncall.tui.board) asks which rows to show and in
which order, and draws them as it draws an alert's. An incident gets a row only when it groups
at least two of the rules shown; the `/` filter shows every alert it matches under its incident
row, expanded, so that the filter still reaches every alert. See `docs/architecture.md` §3.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from oncall.model.alerts import RuleStatus, context_key
from oncall.tui.format import STATE_COLOUR, STATE_SYMBOL, duration

if TYPE_CHECKING:
    from oncall.model.incidents import Incident

#: An incident row's key on the board's table (alert keys never start with it: a rule name
#: holds no ':', a context name no '/').
PREFIX = "incident:"
#: How a member row's name is set under its incident row.
MEMBER_MARK = "  └ "

Cell = tuple[str, str | None, bool]
#: One row to show: its table key, the alert (None for an incident row), the incident (of an
#: incident row, or of the incident row an alert's row is shown under).
Row = tuple[str, RuleStatus | None, "Incident | None"]


def incident_key(incident_id: str) -> str:
    return PREFIX + incident_id


def incident_of(key: str | None) -> str | None:
    """The incident id of an incident row's key; None for an alert's row."""
    return key[len(PREFIX) :] if key is not None and key.startswith(PREFIX) else None


def grouped(incidents: Iterable[Incident], keys: set[str]) -> dict[str, Incident]:
    """rule key → the open incident its row goes under: the oldest open incident holding an
    instance of it, when that incident groups two or more of the rules in `keys`."""
    out: dict[str, Incident] = {}
    for incident in sorted(incidents, key=lambda i: (i.opened_at, i.id)):
        if not incident.ongoing:
            continue
        rules = {context_key(m.context, m.alert) for m in incident.members} & keys
        rules -= out.keys()
        if len(rules) >= 2:
            out.update(dict.fromkeys(rules, incident))
    return out


def arrange(
    statuses: Sequence[RuleStatus],
    incidents: Iterable[Incident],
    expanded: set[str],
    *,
    filtering: bool,
    every: set[str] | None = None,
) -> list[Row]:
    """The rows in order: an incident row where its first alert would be, its alerts under it
    when it is expanded (or a filter is on), every other alert as before. Whether an incident
    gets a row is decided over `every` rule on the board (default: those shown), so that a
    filter matching one of its alerts shows that alert under its incident row."""
    under = grouped(incidents, every if every is not None else {s.key for s in statuses})
    members: dict[str, list[RuleStatus]] = {}
    for status in statuses:
        if status.key in under:
            members.setdefault(under[status.key].id, []).append(status)
    rows: list[Row] = []
    done: set[str] = set()
    for status in statuses:
        incident = under.get(status.key)
        if incident is None:
            rows.append((status.key, status, None))
            continue
        if incident.id in done:
            continue
        done.add(incident.id)
        rows.append((incident_key(incident.id), None, incident))
        if filtering or incident.id in expanded:
            rows.extend((s.key, s, incident) for s in members[incident.id])
    return rows


def rules_of(incident: Incident, statuses: Iterable[RuleStatus]) -> list[RuleStatus]:
    """The rules of `statuses` that have an instance in `incident`."""
    keys = {context_key(m.context, m.alert) for m in incident.members}
    return [s for s in statuses if s.key in keys]


def incident_cells(
    incident: Incident,
    members: Sequence[RuleStatus],
    columns: Sequence[tuple[str, str]],
    now: float,
    *,
    expanded: bool,
) -> tuple[Cell, ...]:
    """The incident row: the worst state of its alerts, '▸ 9 alerts · incident inc-…', how long
    it has been open, and the shared cause in words."""
    states = {s.state for s in members}
    state = next((s for s in ("firing", "pending", "unknown") if s in states), "inactive")
    count = len(incident.members)
    arrow = "▾" if expanded else "▸"
    by_column: dict[str, Cell] = {
        "state": (f"{STATE_SYMBOL[state]} {state}", STATE_COLOUR[state], state == "firing"),
        "context": (incident.context, None, False),
        "alert": (f"{arrow} {count} alerts · {len(members)} rules", None, True),
        "when": (f"open for {duration(max(0.0, now - incident.opened_at))}", None, False),
        "findings": (incident.explanation, "error" if incident.cause else None, False),
        "note": (f"incident {incident.id}", None, False),
    }
    return tuple(by_column.get(key, ("", None, False)) for key, _ in columns)


def as_member(cells: tuple[Cell, ...], columns: Sequence[tuple[str, str]]) -> tuple[Cell, ...]:
    """An alert's cells set under its incident row: its name indented."""
    return tuple(
        (MEMBER_MARK + cell[0], cell[1], cell[2]) if key == "alert" else cell
        for (key, _), cell in zip(columns, cells, strict=False)
    )
