"""Golden alerts for the CLI and the app: find the packs, load them, refresh their states.

Packs are found by name (`alerts.packs`: `ai-service`, `platform`) as `<name>.yaml` in the
folders of `alerts.dirs`, then `./alerts`, then the `alerts/` folder of this checkout; rule
files and folders can also be named directly (`alerts.files`: paths and globs). Besides them,
the engine lists the rules Prometheus evaluates that `alerts.from_prometheus` selects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path
from typing import TYPE_CHECKING

from oncall.alerts.engine import AlertEngine
from oncall.alerts.join import Join
from oncall.alerts.loader import RuleSet, load_rule_files
from oncall.backends import from_settings
from oncall.errors import ConfigError, Problem
from oncall.model.alerts import RuleStatus
from oncall.model.matchers import Selection, parse_selection
from oncall.settings import Settings

if TYPE_CHECKING:
    from oncall.alerts.join import Received
    from oncall.backends.prometheus import PrometheusClient
    from oncall.model.alertmanager import AmSnapshot
    from oncall.service.acks import AckView, Read
    from oncall.service.routing import AlertmanagerView

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


def named_files(settings: Settings) -> list[Path]:
    """`alerts.files` expanded: a glob (`*`, `?`, `[`) to what it matches, sorted; a path as
    it is (the loader reports one that does not exist). A glob matching nothing is a problem."""
    found: list[Path] = []
    for index, entry in enumerate(settings.alerts.files):
        path = Path(entry).expanduser()
        if not any(char in entry for char in "*?["):
            found.append(path)
            continue
        # glob.glob, not Path.glob: the pattern may be absolute (`/etc/prometheus/*.rules`).
        matches = sorted(glob(str(path), recursive=True))  # noqa: PTH207
        if not matches:
            key = f"alerts.files.{index}"
            raise ConfigError([Problem("settings", None, None, key, f"{entry!r} matches nothing")])
        found.extend(Path(match) for match in matches)
    return found


def from_prometheus(settings: Settings) -> Selection | None:
    """The setting `alerts.from_prometheus` as a selection; None for `none`."""
    text = settings.alerts.from_prometheus.strip()
    if text == "none":
        return None
    return Selection() if text == "all" else parse_selection(text, words=False)


def load_packs(settings: Settings) -> RuleSet:
    """Every rule of the configured packs and named files; bad rule files raise ConfigError
    with positions."""
    paths = [*find_packs(settings), *named_files(settings)]
    rules = load_rule_files(paths, for_scale=settings.alerts.for_scale)
    if rules.problems:
        raise ConfigError(rules.problems, what="rule files")
    return rules


@dataclass(frozen=True)
class AlertsReport:
    statuses: list[RuleStatus]
    evaluated_at: float
    prometheus: str
    alertmanager: str | None = None  # its URL when configured: the routing columns are shown
    #: What Prometheus' answers warned of (Thanos: a store that did not answer): a note.
    warnings: tuple[str, ...] = ()
    #: Why Prometheus' rules could not be read (`BackendError` text), None when they were.
    error: str | None = None
    #: Firing instance (`oncall.service.incidents.instance_key`) → its open incident's id.
    incidents: dict[str, str] = field(default_factory=dict)

    @property
    def firing(self) -> bool:
        return any(s.state == "firing" for s in self.statuses)

    @property
    def unreachable(self) -> bool:
        """A state is not known: a rule's source could not be asked, or Prometheus' rules
        could not be read (then the rules only it has are missing from the list)."""
        return self.error is not None or any(s.unreachable for s in self.statuses)


def open_alert_engine(settings: Settings, prom: PrometheusClient | None = None) -> AlertEngine:
    """An engine over the configured packs with its own client of the configured Prometheus
    (or `prom`, a client the caller shares: `oncall check` hands its checklist's); the caller
    closes `engine.prom`. Blocking (the rule files are read and checked): the app calls it in
    a thread. Bad rule files raise ConfigError before any client is made."""
    rules = load_packs(settings).rules
    if prom is None:
        prom = from_settings.prometheus_client(settings.prometheus)
    return AlertEngine(
        prom, rules, source=settings.alerts.source, from_prometheus=from_prometheus(settings)
    )


async def add_cluster_rules(engine: AlertEngine, settings: Settings) -> None:
    """With `alerts.prometheus_rules: cluster`, the rules of the cluster's PrometheusRule
    objects join the engine's (a local rule of the same group and name stays the one);
    objects with problems raise ConfigError naming each object and LINE:COL in it."""
    config = settings.alerts
    if config.prometheus_rules != "cluster":
        return
    from oncall.alerts.cluster_rules import cluster_rules
    from oncall.backends.from_settings import kube_reader

    reader = await kube_reader(settings.kubernetes)
    try:
        found = await cluster_rules(
            reader,
            config.prometheus_rules_namespace,
            config.prometheus_rules_selector,
            for_scale=config.for_scale,
        )
    finally:
        await reader.aclose()
    if found.problems:
        raise ConfigError(found.problems, what="PrometheusRule objects")
    have = {(r.group, r.name) for r in engine.rules}
    engine.rules.extend(r for r in found.rules if (r.group, r.name) not in have)


@asynccontextmanager
async def alert_engine(
    settings: Settings, prom: PrometheusClient | None = None
) -> AsyncIterator[AlertEngine]:
    """`open_alert_engine` for the length of a `with`: the client is closed after it, unless
    it is `prom`, the caller's (left open for the caller's later requests)."""
    engine = open_alert_engine(settings, prom)
    try:
        await add_cluster_rules(engine, settings)
        yield engine
    finally:
        if prom is None:
            await engine.prom.aclose()


async def refresh_joined(
    engine: AlertEngine,
    now: float | None = None,
    *,
    alertmanager: AlertmanagerView | None = None,
    acks: AckView | None = None,
) -> list[RuleStatus]:
    """One refresh of the alert route (docs/architecture.md, §3 "The three routes"): Alertmanager's
    and the acknowledgements' reads started beside Prometheus' request, both awaited at most
    their grace once it answered, concurrently, then the engine's one worker decodes
    Alertmanager's answer with Prometheus' and builds each status with its routing and
    acknowledgement; the acknowledgements of resolved rules are cleared after it."""
    view = alertmanager if alertmanager is not None and alertmanager.enabled else None
    if view is None and acks is None:
        return await engine.refresh(now)
    if view is not None:
        view.start()  # beside Prometheus' request, not after it
    if acks is not None:
        acks.start()
    read: list[Read] = []

    async def join() -> Join:
        snapshot, ack_read = await asyncio.gather(_snapshot(view), _acks(acks))
        if ack_read is not None:
            read.append(ack_read)
        return Join(snapshot, ack_read)

    statuses = await engine.refresh(now, join=join)
    if acks is not None and read:
        await acks.clear_resolved(statuses, read[0])
    return statuses


async def _snapshot(view: AlertmanagerView | None) -> AmSnapshot | Received | None:
    return None if view is None else await view.latest()


async def _acks(acks: AckView | None) -> Read | None:
    return None if acks is None else await acks.latest()
