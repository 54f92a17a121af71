"""What Alertmanager and the team's acknowledgements add to a rule's state: pure functions.

A refresh stage (docs/architecture.md, §3 "The three routes") reads Alertmanager's alerts and the
acknowledgements beside Prometheus' rules and hands both here as a `Join`; the states are then
built once with them (`oncall.alerts.states`): each firing instance with what Alertmanager
does with it, each active rule with its counts and acknowledgement. Alertmanager's answer
comes as received (`Received`) and is decoded in the refresh's one worker
(`Joiner.decode`), beside Prometheus'.

Prometheus sends an instance's labels (plus its `external_labels`, which the instance lacks):
an Alertmanager alert is matched by the whole label set first, and only when that misses by
the labels of the names the rule's instances have, so extra labels do not stop the match.
An acknowledgement is shown on a firing or pending rule only; one that could not be read
(Redis down) is `ack unknown` on each of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from oncall.errors import BackendError
from oncall.model.alertmanager import (
    Acknowledgement,
    AmAlert,
    AmSnapshot,
    Inhibitor,
    InstanceRouting,
    RuleRouting,
)
from oncall.model.alerts import AlertStateName, RuleStatus

#: The states an acknowledgement is shown in; in any other the alert has resolved.
ACTIVE_STATES = ("firing", "pending")
#: One read of the acknowledgements: by rule name, or why they could not be read.
AckRead = dict[str, Acknowledgement] | BackendError
Labels = Mapping[str, str]


class Received(Protocol):
    """An Alertmanager read as received, not yet decoded (`oncall.service.routing`)."""

    def decoded(self) -> AmSnapshot:
        """The read's snapshot, decoded at the first call (blocking: call it in a worker
        thread, the collector paused); never raises (a failure is a snapshot that says so)."""
        ...


@dataclass(frozen=True)
class Join:
    """This refresh's reads beside Prometheus': None where none is configured. Alertmanager's
    is a snapshot done (a failure, a timeout) or an answer received, decoded by the Joiner."""

    snapshot: AmSnapshot | Received | None = None
    acks: AckRead | None = None


class Joiner:
    """A `Join` indexed once per refresh, asked per rule while its states are built."""

    def __init__(self, join: Join) -> None:
        self.acks = join.acks
        read = join.snapshot
        self._snapshot = read if isinstance(read, AmSnapshot) else None
        self._received = None if isinstance(read, AmSnapshot) else read
        # Indexed when first asked, in the refresh's worker: 5,000 alerts are milliseconds.
        self._by_name: dict[str, list[AmAlert]] | None = None
        self._fingerprints: dict[str, AmAlert] = {}

    @property
    def pending(self) -> bool:
        """Whether Alertmanager's answer is still to be decoded (`decode`)."""
        return self._received is not None

    def decode(self) -> None:
        """Decode Alertmanager's answer (blocking: in the refresh's worker thread, the
        collector paused); nothing when there is none or it is decoded already."""
        received = self._received
        if received is not None:
            self._snapshot = received.decoded()
            self._received = None

    @property
    def snapshot(self) -> AmSnapshot | None:
        """Alertmanager's read (None without Alertmanager); decoded here if `decode` was not
        called (the refresh calls it in its worker first)."""
        self.decode()
        return self._snapshot

    def routings(self, rule: str, firing: Sequence[Labels]) -> list[InstanceRouting] | None:
        """What Alertmanager does with each firing label set of `rule`, in order; None
        without Alertmanager or with nothing firing."""
        snapshot = self.snapshot
        if snapshot is None or not firing:
            return None
        if snapshot.reason is not None:
            unknown = InstanceRouting("unknown", reason=snapshot.reason, error=snapshot.error)
            return [unknown] * len(firing)
        if self._by_name is None:
            self._by_name = {}
            for alert in snapshot.alerts:
                self._by_name.setdefault(alert.name, []).append(alert)
            self._fingerprints = {alert.fingerprint: alert for alert in snapshot.alerts}
        return _routings(firing, self._by_name.get(rule, []), snapshot, self._fingerprints)

    def rule_routing(
        self, rule: str, state: AlertStateName, routings: list[InstanceRouting] | None
    ) -> RuleRouting | None:
        """The rule's routing cell: its firing instances' counts and, when it is active, its
        acknowledgement (or why they could not be read)."""
        counts = RuleRouting.of(routings) if routings else None
        acks = self.acks
        if acks is None or state not in ACTIVE_STATES:
            return counts
        if isinstance(acks, BackendError):
            return replace(counts or RuleRouting(), ack_error=str(acks))
        ack = acks.get(rule)
        return counts if ack is None else replace(counts or RuleRouting(), ack=ack)


def _routings(
    firing: Sequence[Labels],
    held: list[AmAlert],
    snapshot: AmSnapshot,
    fingerprints: dict[str, AmAlert],
) -> list[InstanceRouting]:
    # By the whole label set first; only when that misses (labels Prometheus added, its
    # external_labels), by the labels of the names the rule's instances have.
    index = {frozenset(alert.labels.items()): alert for alert in held}
    narrowed: dict[frozenset[tuple[str, str]], AmAlert] | None = None
    missing = InstanceRouting("missing")
    active = InstanceRouting("active")
    result: list[InstanceRouting] = []
    for labels in firing:
        key = frozenset(labels.items())
        alert = index.get(key)
        if alert is None and held:
            if narrowed is None:
                names = {name for each in firing for name in each}
                narrowed = {
                    frozenset((k, v) for k, v in a.labels.items() if k in names): a for a in held
                }
            alert = narrowed.get(key)
        if alert is None:
            result.append(missing)
        elif alert.silenced_by:
            silences = tuple(
                snapshot.silences[s] for s in alert.silenced_by if s in snapshot.silences
            )
            result.append(
                InstanceRouting("silenced", silenced_by=alert.silenced_by, silences=silences)
            )
        elif alert.inhibited_by:
            inhibitors = tuple(
                Inhibitor(fp, fingerprints[fp].labels if fp in fingerprints else None)
                for fp in alert.inhibited_by
            )
            result.append(InstanceRouting("inhibited", inhibited_by=inhibitors))
        elif alert.muted_by:
            result.append(InstanceRouting("muted", muted_by=alert.muted_by))
        elif alert.state == "unprocessed":
            result.append(InstanceRouting("unprocessed"))
        else:
            result.append(active)
    return result


def route(statuses: list[RuleStatus], snapshot: AmSnapshot) -> list[RuleStatus]:
    """Statuses built without Alertmanager, joined to it afterwards (a copy of each firing
    rule and instance): for a caller that holds statuses already; a refresh builds them with
    their routing instead (`oncall.alerts.states`)."""
    joiner = Joiner(Join(snapshot=snapshot))
    out = []
    for status in statuses:
        firing = [i for i in status.instances if i.state == "firing"]
        routings = joiner.routings(status.rule.name, [i.labels for i in firing])
        if routings is None:
            out.append(status)
            continue
        by_instance = {id(i): r for i, r in zip(firing, routings, strict=True)}
        instances = tuple(
            replace(i, routing=by_instance[id(i)]) if id(i) in by_instance else i
            for i in status.instances
        )
        out.append(replace(status, instances=instances, routing=RuleRouting.of(routings)))
    return out


def with_ack(status: RuleStatus, read: AckRead) -> RuleStatus:
    """The status with its rule's acknowledgement in its routing (active rules only), for a
    caller that holds statuses already (see `route`)."""
    if status.state not in ACTIVE_STATES:
        return status
    routing = status.routing or RuleRouting()
    if isinstance(read, BackendError):
        return replace(status, routing=replace(routing, ack_error=str(read)))
    ack = read.get(status.rule.name)
    return status if ack is None else replace(status, routing=replace(routing, ack=ack))
