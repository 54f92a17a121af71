"""Fold a fresh grouping into the incidents already kept, so that an incident keeps its id
while it lasts, whoever computed it (an app, a serve replica) and in whatever order.

Membership is sticky: an instance in an open incident stays in it; the new instances of a
fresh group join the open incident that holds most of that group's known instances (ties: the
earliest opened), or make a new one. Two open incidents of several alerts are never merged;
an incident of one alert whose alert now groups with others (its checklist ran after it
opened) joins theirs, and is closed as "merged into inc-…". A closed incident never reopens:
its instance firing again (a later first firing) is a new incident, and the same firing seen
again by a writer that learnt late of it (serve, holding the firings of the last window) is
dropped, not made a new incident under the closed one's id. A writer that sees only some
firings never undoes a resolution of the same firing. An open incident whose members have all
resolved closes `close_after` after the last resolution. Pure; the store runs it
inside a Redis transaction (`oncall.backends.incidents.IncidentStore.merge`).
See `docs/architecture.md` §3.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import replace

from oncall.model.incidents import Incident, Member, incident_id


def _merged_member(
    old: Member, new: Member | None, now: float, resolving: set[str], *, partial: bool
) -> Member:
    """The kept member updated by what the fresh grouping saw of it (None: not seen; in a
    context the writer saw whole, it is no longer firing, so it resolved now). A `partial`
    writer's "still firing" does not undo a resolution unless it fired again since."""
    if new is None:
        if old.resolved_at is not None or old.context not in resolving:
            return old
        return replace(old, resolved_at=now)
    resolved_at = new.resolved_at
    if partial and resolved_at is None and old.resolved_at is not None:
        resolved_at = old.resolved_at if new.first_firing <= old.resolved_at else None
    return replace(
        old,
        first_firing=min(old.first_firing, new.first_firing),
        resolved_at=resolved_at,
        group_key=old.group_key or new.group_key,
    )


def _without_closed_firings(fresh: list[Incident], kept: list[Incident],
                            home: Collection[str]) -> list[Incident]:  # fmt: skip
    """`fresh` less the instances a closed incident already holds (the same firing: first
    fired no later than it closed), unless an open incident holds them too. A group left
    with members is named after its first one again (its id is the first member's)."""
    closed = {m.key: inc.closed_at for inc in kept if inc.closed_at is not None
              for m in inc.members}  # fmt: skip

    def still_news(m: Member) -> bool:
        return m.key in home or m.key not in closed or m.first_firing > closed[m.key]

    out = []
    for group in fresh:
        members = [m for m in group.members if still_news(m)]
        if len(members) == len(group.members):
            out.append(group)
        elif members:
            first = members[0]
            out.append(replace(group, id=incident_id(first), opened_at=first.first_firing,
                               members=tuple(members), context=first.context))  # fmt: skip
    return out


def _closed(incident: Incident, close_after: float, now: float) -> Incident:
    ends = [m.resolved_at for m in incident.members]
    if incident.closed_at is not None or None in ends:
        return incident
    last = max(e for e in ends if e is not None)
    if now < last + close_after:
        return incident
    return replace(incident, closed_at=last + close_after)


def merge(
    kept: list[Incident],
    fresh: list[Incident],
    *,
    now: float,
    close_after: float,
    seen_contexts: Collection[str] | None = None,
) -> list[Incident]:
    """The incidents to write: every kept open incident updated, and the new ones, in id
    order. `fresh` is the grouping of the instances the writer knows of; a kept member of a
    context in `seen_contexts` that `fresh` lacks has stopped firing (the writer saw every
    instance of that context: the app's refresh). None: the writer sees only some firings
    (`oncall serve`'s notifications) and resolves nothing it was not told of."""
    resolving = set(seen_contexts or ())
    partial = seen_contexts is None
    open_kept = sorted((i for i in kept if i.ongoing), key=lambda i: (i.opened_at, i.id))
    home = {m.key: inc.id for inc in open_kept for m in inc.members}
    fresh = _without_closed_firings(fresh, kept, home)
    seen: dict[str, Member] = {m.key: m for inc in fresh for m in inc.members}
    size = {inc.id: len(inc.members) for inc in open_kept}
    by_id = {inc.id: inc for inc in open_kept}
    order = {inc.id: n for n, inc in enumerate(open_kept)}
    additions: dict[str, list[Member]] = {}
    explained: dict[str, Incident] = {}
    moved: dict[str, str] = {}  # incident of one alert → the incident it joins
    new: list[Incident] = []
    for group in fresh:
        known = Counter(home[m.key] for m in group.members if m.key in home)
        newcomers = [m for m in group.members if m.key not in home]
        if not known:
            new.append(group)
            continue
        # A group of several: the incident holding most of it, a multi-alert one first.
        target = min(known, key=lambda i: (size[i] < 2, -known[i], order[i]))
        additions.setdefault(target, []).extend(newcomers)
        for other in sorted(known):
            if other != target and size[other] == 1 and other not in moved:
                moved[other] = target
                (member,) = by_id[other].members
                additions[target].append(
                    _merged_member(member, seen.get(member.key), now, resolving, partial=partial)
                )
        # The explanation of the fresh group that holds most of the incident's instances.
        best = explained.get(target)
        if best is None or len(group.members) > len(best.members):
            explained[target] = group
    out = list(new)
    for inc in open_kept:
        if inc.id in moved:
            into = moved[inc.id]
            extra = {**inc.extra, "merged_into": into}
            out.append(replace(inc, closed_at=now, explanation=f"merged into {into}", extra=extra))
            continue
        members = [_merged_member(m, seen.get(m.key), now, resolving, partial=partial)
                   for m in inc.members]  # fmt: skip
        members += additions.get(inc.id, [])
        members.sort(key=lambda m: (m.first_firing, m.key))
        why = explained.get(inc.id)
        if why is not None and len(why.members) < 2 and len(members) > 1:
            why = None  # one newcomer's "alone: …" does not explain a group
        updated = replace(
            inc,
            members=tuple(members),
            cause=why.cause if why is not None else inc.cause,
            explanation=why.explanation if why is not None else inc.explanation,
        )
        out.append(_closed(updated, close_after, now))
    return sorted((_closed(i, close_after, now) for i in out), key=lambda i: i.id)
