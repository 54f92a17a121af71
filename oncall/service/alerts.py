"""Golden alerts for the CLI and the app: find the packs, load them, refresh their states.

Packs are found by name (`alerts.packs`: `ai-service`, `platform`) as `<name>.yaml` in the
folders of `alerts.dirs`, then `./alerts`, then the `alerts/` folder of this checkout.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from oncall.alerts.engine import AlertEngine
from oncall.alerts.loader import RuleSet, load_rule_files
from oncall.backends import from_settings
from oncall.errors import ConfigError, Problem
from oncall.model.alerts import RuleStatus
from oncall.settings import Settings

CHECKOUT_ALERTS = Path(__file__).resolve().parents[2] / "alerts"


def pack_dirs(settings: Settings) -> list[Path]:
    return [*settings.alerts.dirs, Path("alerts"), CHECKOUT_ALERTS]


def find_packs(settings: Settings) -> list[Path]:
    """The rule file of each configured pack; a pack found nowhere is a settings problem."""
    files, problems = [], []
    for name in settings.alerts.packs:
        candidates = [d / f"{name}{ext}" for d in pack_dirs(settings) for ext in (".yaml", ".yml")]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            searched = ", ".join(str(d) for d in dict.fromkeys(pack_dirs(settings)))
            message = f"no pack {name!r} in {searched}"
            problems.append(Problem("settings", None, None, "alerts.packs", message))
        else:
            files.append(found)
    if problems:
        raise ConfigError(problems)
    return files


def load_packs(settings: Settings) -> RuleSet:
    """Every rule of the configured packs; bad rule files raise ConfigError with positions."""
    rules = load_rule_files(find_packs(settings), for_scale=settings.alerts.for_scale)
    if rules.problems:
        raise ConfigError(rules.problems, what="rule files")
    return rules


@dataclass(frozen=True)
class AlertsReport:
    statuses: list[RuleStatus]
    evaluated_at: float
    prometheus: str

    @property
    def firing(self) -> bool:
        return any(s.state == "firing" for s in self.statuses)

    @property
    def unreachable(self) -> bool:
        return any(s.unreachable for s in self.statuses)


def open_alert_engine(settings: Settings) -> AlertEngine:
    """An engine over the configured packs with its own client of the configured Prometheus;
    the caller closes `engine.prom`. Blocking (the rule files are read and checked): the app
    calls it in a thread. Bad rule files raise ConfigError before any client is made."""
    rules = load_packs(settings).rules
    prom = from_settings.prometheus_client(settings.prometheus)
    return AlertEngine(prom, rules, source=settings.alerts.source)


@asynccontextmanager
async def alert_engine(settings: Settings) -> AsyncIterator[AlertEngine]:
    """`open_alert_engine` for the length of a `with`: the client is closed after it."""
    engine = open_alert_engine(settings)
    async with engine.prom:
        yield engine
