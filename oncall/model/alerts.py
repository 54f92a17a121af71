"""Alert rules and alert states as plain values (DESIGN §4 "Alerts")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

AlertStateName = Literal["inactive", "pending", "firing", "unknown"]
SourceName = Literal["prometheus", "local"]


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule of a Prometheus rule file, located in its file.

    `for_s` and `keep_firing_for_s` are seconds (0 when absent), already multiplied by the
    `alerts.for_scale` setting when a drill scales them.
    """

    name: str
    expr: str
    group: str
    file: str
    line: int
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    group_interval_s: float | None = None

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")


@dataclass(frozen=True)
class AlertInstance:
    """The state of one alert for one label set, at one evaluation.

    `active_since` is when the expression first returned this label set (pending start);
    `fires_in_s` is the time left until it fires, while pending; `firing_for_s` the time since
    it fired. `stale_since` is set when this state is an old one kept because the source could
    not be asked (then `error` says why).
    """

    rule: str
    state: AlertStateName
    labels: dict[str, str]
    value: float | None
    active_since: float | None
    fires_in_s: float | None
    firing_for_s: float | None
    last_evaluation: float | None
    source: SourceName
    error: str | None = None
    stale_since: float | None = None


@dataclass(frozen=True)
class RuleStatus:
    """One rule's state after a refresh, with the instances behind it."""

    rule: AlertRule
    source: SourceName
    state: AlertStateName
    instances: tuple[AlertInstance, ...]
    error: str | None = None
    stale_since: float | None = None
    last_evaluation: float | None = None

    @property
    def value(self) -> float | None:
        """The most severe instance's value (firing before pending), if any."""
        for wanted in ("firing", "pending"):
            for instance in self.instances:
                if instance.state == wanted and instance.value is not None:
                    return instance.value
        return None

    @property
    def fires_in_s(self) -> float | None:
        waits = [i.fires_in_s for i in self.instances if i.fires_in_s is not None]
        return min(waits) if waits and self.state == "pending" else None

    @property
    def firing_for_s(self) -> float | None:
        times = [i.firing_for_s for i in self.instances if i.firing_for_s is not None]
        return max(times) if times and self.state == "firing" else None
