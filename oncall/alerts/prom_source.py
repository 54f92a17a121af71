"""Alert states of rules deployed to Prometheus, from one `/api/v1/rules` request.

Equivalent of `curl -s 'http://PROM/api/v1/rules?type=alert'`. Prometheus reports, per
alerting rule, each active label set with its state and `activeAt`; the countdown of a
pending alert is `for - (now - activeAt)`. Prometheus does not report when a pending alert
turned firing, so `firing_for_s` is counted from `activeAt + for`, which is the same unless
the rule's `for` changed while the alert was active.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from oncall.model.alertmanager import InstanceRouting
from oncall.model.alerts import AlertInstance, AlertStateName

_FRACTION = re.compile(r"\.(\d+)")
_NEVER = datetime(1970, 1, 2, tzinfo=UTC).timestamp()


@lru_cache(maxsize=16384)
def parse_time(text: str | None) -> float | None:
    """Unix seconds of a Prometheus RFC 3339 time (nanosecond fractions); None for "never".

    Cached: an alert's `activeAt` is the same string at every refresh while it is active, and
    a board of 5,000 instances would otherwise parse 5,000 of them a refresh."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text).timestamp()  # "Z" and 9 digits: Python >= 3.11
    except ValueError:
        # Python parses at most microseconds: cut the fraction to six digits.
        trimmed = _FRACTION.sub(
            lambda m: "." + m.group(1)[:6], text.replace("Z", "+00:00"), count=1
        )
        try:
            value = datetime.fromisoformat(trimmed).timestamp()
        except ValueError:
            return None
    return None if value < _NEVER else value  # "0001-01-01T00:00:00Z": not evaluated yet


def _number(text: object) -> float | None:
    try:
        return float(str(text))
    except ValueError:
        return None


def deployed_alerting_rules(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Alerting rules by name, from `/api/v1/rules` groups (first one wins on duplicates)."""
    found: dict[str, dict[str, Any]] = {}
    for group in groups:
        for rule in group.get("rules") or []:
            if rule.get("type") == "alerting" and rule.get("name") not in found:
                found[str(rule["name"])] = rule
    return found


def instances_of(
    rule: dict[str, Any],
    now: float,
    *,
    route: Callable[[list[dict[str, str]]], list[InstanceRouting] | None] | None = None,
) -> list[AlertInstance]:
    """The active label sets of one deployed rule, as AlertInstances (inactive: none).

    `route`: given the firing instances' label sets, in order, what Alertmanager does with
    each (`oncall.alerts.join`); each instance is then made once, with its routing."""
    duration = float(rule.get("duration") or 0.0)
    last_evaluation = parse_time(rule.get("lastEvaluation"))
    error = rule.get("lastError") or None if rule.get("health") == "err" else None
    name = str(rule["name"])
    read = []
    for alert in rule.get("alerts") or []:
        state: AlertStateName = "firing" if alert.get("state") == "firing" else "pending"
        # Interned: a fleet's 5,000 instances repeat a few namespaces, jobs and label names,
        # and the board holds two refreshes' instances at once (one copy of each string).
        labels = {
            sys.intern(k): sys.intern(str(v))
            for k, v in (alert.get("labels") or {}).items()
            if k != "alertname"
        }
        read.append((alert, state, labels))
    routings = None
    if route is not None:
        routings = route([labels for _, state, labels in read if state == "firing"])
    order = iter(routings or ())
    instances = []
    for alert, state, labels in read:
        active_since = parse_time(alert.get("activeAt"))
        fires_in = firing_for = None
        if active_since is not None:
            if state == "pending":
                # Clamped to the rule's `for:` too: an activeAt a little after `now` (taken
                # before the request, or a Prometheus clock ahead of ours) is not a longer wait.
                fires_in = min(duration, max(0.0, duration - (now - active_since)))
            else:
                firing_for = max(0.0, now - (active_since + duration))
        instances.append(
            AlertInstance(
                rule=name,
                state=state,
                labels=labels,
                value=_number(alert.get("value")),
                active_since=active_since,
                fires_in_s=fires_in,
                firing_for_s=firing_for,
                last_evaluation=last_evaluation,
                source="prometheus",
                error=error,
                # Prometheus' own expansion of the rule's templates for this alert.
                annotations={str(k): str(v) for k, v in (alert.get("annotations") or {}).items()},
                routing=next(order) if routings and state == "firing" else None,
            )
        )
    return instances
