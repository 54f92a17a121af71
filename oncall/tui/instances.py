"""The incident screen's instances panel: each label set of the alert, its state and summary.

One line per instance — state, label set (without `alertname`), active since, value — and
the instance's summary as Prometheus expanded it (or the local evaluation did, the same way),
the worst first (firing, then pending); at most `SHOWN` of them, then how many more, so that
the screen still fits 80x24. With an Alertmanager configured, a firing instance's line ends
with what Alertmanager does with it (`am active`, `am silenced`, …), and a silenced,
inhibited or unknown one has a line saying by whom until when and why, by what, or the reason.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from oncall.model.alerts import AlertInstance, RuleStatus
from oncall.tui.format import STATE_SYMBOL, duration
from oncall.tui.terminal_safe import safe_text

SHOWN = 3
_ORDER = {"firing": 0, "pending": 1}


def _labels(instance: AlertInstance) -> str:
    pairs = [f'{k}="{v}"' for k, v in sorted(instance.labels.items()) if k != "alertname"]
    return "{" + ", ".join(pairs) + "}"


def first_instance(status: RuleStatus | None) -> AlertInstance | None:
    """The instance the panel lists first (the worst): what `s` silences."""
    if status is None or not status.instances:
        return None
    return min(status.instances, key=lambda i: _ORDER.get(i.state, 2))


def instance_lines(status: RuleStatus | None, now: float) -> list[str]:
    """The panel's text, line by line (the tests read these)."""
    if status is None or not status.instances:
        return []
    ordered = sorted(status.instances, key=lambda i: _ORDER.get(i.state, 2))
    lines = [f"{len(ordered)} instance{'s' if len(ordered) != 1 else ''}"]
    for instance in ordered[:SHOWN]:
        parts = [f"{STATE_SYMBOL.get(instance.state, '?')} {instance.state}", _labels(instance)]
        if instance.active_since is not None:
            parts.append(f"since {duration(now - instance.active_since)}")
        if instance.value is not None:
            parts.append(f"value {instance.value:.4g}")
        routing = instance.routing
        if routing is not None:
            parts.append(f"am {routing.state}")
        lines.append("  ".join(parts))
        if routing is not None and routing.state in ("silenced", "inhibited", "muted", "unknown"):
            lines.append(f"    {routing.text(now)}")
        summary = instance.annotations.get("summary") or instance.annotations.get("description")
        if summary:
            lines.append(f"    {summary.strip().splitlines()[0]}")
    if len(ordered) > SHOWN:
        lines.append(f"… {len(ordered) - SHOWN} more (oncall alerts -o json lists them all)")
    return lines


class InstancesPanel(Static):
    """Shows `instance_lines`; hidden (no height) when the alert has no instance."""

    DEFAULT_CSS = """
    InstancesPanel { height: auto; max-height: 8; padding: 0 1; }
    """

    def show_status(self, status: RuleStatus | None, now: float) -> None:
        lines = instance_lines(status, now)
        self.display = bool(lines)
        self.update(Text(safe_text("\n".join(lines)), end=""))
