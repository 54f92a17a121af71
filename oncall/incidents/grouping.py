"""Grouping: alert instances → incidents, deterministically, with the reason in words.

Two instances are one incident when they fire within `window` of each other and their failing
checklist steps implicate the same target (`oncall.incidents.targets`), or when Alertmanager
grouped them (its `groupKey`, from `oncall serve`'s notifications). An instance whose checklist
implicates several targets joins the one most instances implicate (ties: the target's name),
so that one alert failing on two things never chains two unrelated incidents into one. The
result depends on the set of instances only, never on their order: every sort has a total key.
See `docs/architecture.md` §3.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from oncall.model.incidents import Cause, Incident, Member, incident_id


@dataclass(frozen=True)
class Observed:
    """One alert instance as the grouping sees it: the member, and what its latest checklist
    run found (`failing`: target → ids of the steps failing on it; `checked`: a run exists)."""

    member: Member
    failing: Mapping[str, Sequence[str]] = field(default_factory=dict)
    checked: bool = False


def _order(m: Member) -> tuple[float, str]:
    return (m.first_firing, m.key)


def _deduplicated(observed: Iterable[Observed]) -> list[Observed]:
    """One entry per instance (its key): the earliest firing, the union of findings."""
    by_key: dict[str, Observed] = {}
    for o in observed:
        seen = by_key.get(o.member.key)
        if seen is None:
            by_key[o.member.key] = o
            continue
        first = min(seen.member, o.member, key=lambda m: (m.first_firing, m.resolved_at or 0.0))
        ends = [m.resolved_at for m in (seen.member, o.member)]
        failing = {t: tuple(sorted({*seen.failing.get(t, ()), *o.failing.get(t, ())}))
                   for t in {*seen.failing, *o.failing}}  # fmt: skip
        by_key[o.member.key] = Observed(
            replace(
                first,
                resolved_at=None if None in ends else max(e for e in ends if e is not None),
                group_key=seen.member.group_key or o.member.group_key,
            ),
            failing,
            seen.checked or o.checked,
        )
    return sorted(by_key.values(), key=lambda o: _order(o.member))


def _split(members: list[Observed], window: float) -> list[list[Observed]]:
    """Runs of instances (sorted by firing) no more than `window` apart, one after another."""
    runs: list[list[Observed]] = []
    last = float("-inf")
    for o in members:
        if not runs or o.member.first_firing - last > window:
            runs.append([])
        runs[-1].append(o)
        last = o.member.first_firing
    return runs


def _with_target(run: list[Observed], target: str) -> Incident:
    """The incident of a run on `target`: its cause is the step failing on it most often;
    the count is the checklists failing on it at all (any step), and the words name up to
    three of those steps, most frequent first ("kv_cache, kv_fit fail on …")."""
    steps = Counter(step for o in run for step in set(o.failing.get(target, ())))
    named = sorted(steps, key=lambda s: (-steps[s], s))
    count = sum(1 for o in run if o.failing.get(target))
    checked = sum(1 for o in run if o.checked)
    shown = ", ".join(named[:3]) + (", …" if len(named) > 3 else "")
    verb = "fails" if len(named) == 1 else "fail"
    if len(run) == 1:
        why = f"alone: {shown} {verb} on {target}, no other alert implicates it"
    else:
        why = f"grouped: {shown} {verb} on {target} in {count} of {checked} checklists"
    return _incident(run, Cause(named[0], target, count, checked), why)


def _incident(run: list[Observed], cause: Cause | None, why: str) -> Incident:
    members = tuple(sorted((o.member for o in run), key=_order))
    return Incident(
        id=incident_id(members[0]),
        opened_at=members[0].first_firing,
        members=members,
        cause=cause,
        explanation=why,
        context=members[0].context,
    )


def _alone(o: Observed) -> Incident:
    if not o.checked:
        why = "alone: no checklist has run for it yet"
    else:
        why = "alone: its checklist finds no failing target"
    return _incident([o], None, why)


def group(observed: Iterable[Observed], *, window: float) -> list[Incident]:
    """The incidents of `observed`, oldest first; each carries its explanation."""
    items = _deduplicated(observed)
    implicated = Counter(t for o in items for t in o.failing)
    by_target: dict[str, list[Observed]] = {}
    untargeted: list[Observed] = []
    for o in items:
        if o.failing:
            primary = min(o.failing, key=lambda t: (-implicated[t], t))
            by_target.setdefault(primary, []).append(o)
        else:
            untargeted.append(o)
    runs = [(target, run) for target, members in sorted(by_target.items())
            for run in _split(members, window)]  # fmt: skip
    # Alertmanager's groups: an instance without a target joins the run holding another
    # instance of its groupKey (the earliest such run), else the others of its groupKey.
    by_group_key: dict[str, int] = {}
    for index, (_, run) in sorted(enumerate(runs), key=lambda e: _order(e[1][1][0].member)):
        for o in run:
            if o.member.group_key:
                by_group_key.setdefault(o.member.group_key, index)
    joined: dict[int, list[Observed]] = {}
    by_key_only: dict[str, list[Observed]] = {}
    alone: list[Observed] = []
    for o in untargeted:
        gk = o.member.group_key
        if gk and gk in by_group_key:
            joined.setdefault(by_group_key[gk], []).append(o)
        elif gk:
            by_key_only.setdefault(gk, []).append(o)
        else:
            alone.append(o)
    incidents = [
        _with_target(sorted([*run, *joined.get(i, [])], key=lambda o: _order(o.member)), target)
        for i, (target, run) in enumerate(runs)
    ]
    for gk, members in sorted(by_key_only.items()):
        for run in _split(members, window):
            if len(run) == 1:
                incidents.append(_alone(run[0]))
                continue
            cause = Cause("", f"Alertmanager group {gk}", len(run), len(run))
            why = f"grouped: Alertmanager groups these {len(run)} alerts ({gk})"
            incidents.append(_incident(run, cause, why))
    incidents.extend(_alone(o) for o in alone)
    return sorted(incidents, key=lambda i: (i.opened_at, i.id))
