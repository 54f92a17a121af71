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
