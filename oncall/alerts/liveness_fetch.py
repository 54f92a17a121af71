"""The facts rule liveness is judged on (`oncall.alerts.liveness.Facts`), asked of Prometheus in
a few batched requests, and the verdicts of every rule, cached for minutes.

One round, for any number of rules (scripts/bench/liveness.py counts them):
1. `GET /api/v1/targets`: the scrape interval of each job (none where the server has no
   targets API: Mimir, some Thanos Query setups; windows are then not checked);
2. per `SELECTORS_PER_QUERY` selectors, one instant query `count by (job) (SEL)` for each,
   tagged with its index and joined with `or` (as `local_eval.batch_expression` does): which
   selectors match series now, and of which jobs;
3. for the selectors that match nothing, one query `count by (__name__) ({__name__=~"…"})`
   per `NAMES_PER_QUERY` names: their metric names and the known alternatives
   (`liveness.alternatives`) that exist;
4. for those whose metric exists, one query `group by (LABEL) (METRIC)` per (metric, label)
   of an emptying matcher, batched as in 2: the values the label does have.
Parsing and judging run in a worker thread: the event loop only sends and receives.
A batch Prometheus refuses (a selector its version does not read) is asked again in halves,
at most `SPLIT_REQUESTS` more queries a round; what is still refused stays unknown.
Prometheus unreachable makes every verdict `unknown` with the reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from oncall.alerts.durations import parse_prom_duration
from oncall.alerts.liveness import Facts, Selector, alternatives, judge, selectors_of
from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError
from oncall.model.alerts import Liveness

SELECTORS_PER_QUERY = 500
NAMES_PER_QUERY = 1000
#: At most this many more queries a round when a batch is refused (it is asked in halves).
SPLIT_REQUESTS = 32
#: Liveness changes with deployments, not by the second: asked again after this long.
TTL_S = 300.0
_TAG = "oncall_liveness"


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _tagged(parts: Sequence[str]) -> str:
    return " or ".join(
        f'label_replace({part}, "{_TAG}", "{index}", "", "")' for index, part in enumerate(parts)
    )


async def _tagged_query(prom: PrometheusClient, parts: Sequence[str]) -> list[list[dict[str, str]]]:
    """Label sets per part, from one query; [] for each part when Prometheus refuses it."""
    found: list[list[dict[str, str]]] = [[] for _ in parts]
    for sample in await prom.query(_tagged(parts)):
        labels = dict(sample.labels)
        index = labels.pop(_TAG, "")
        if index.isdigit() and int(index) < len(parts):
            found[int(index)].append(labels)
    return found


def _intervals(targets: list[dict[str, object]]) -> dict[str, float]:
    """job → the largest scrape interval of its targets (`scrapeInterval`, Prometheus ≥ 2.35)."""
    found: dict[str, float] = {}
    for target in targets:
        labels = target.get("labels")
        job = labels.get("job") if isinstance(labels, dict) else None
        raw = target.get("scrapeInterval")
        if not isinstance(job, str) or not isinstance(raw, str):
            continue
        try:
            seconds = parse_prom_duration(raw)
        except ValueError:
            continue
        found[job] = max(seconds, found.get(job, 0.0))
    return found


async def _scrape_intervals(prom: PrometheusClient) -> dict[str, float]:
    """job → scrape interval; {} where the server has no targets API (Mimir, a Thanos Query
    without it answer 404): the windows are then not checked, the rest still is."""
    try:
        return _intervals(await prom.targets())
    except BackendError as exc:
        if exc.http_status is not None and 400 <= exc.http_status < 500:
            return {}
        raise


def _unique_selectors(exprs: Iterable[str]) -> list[Selector]:
    unique: dict[str, Selector] = {}
    for expr in exprs:
        for selector in selectors_of(expr):
            unique.setdefault(selector.text, selector)
    return list(unique.values())


async def fetch_facts(prom: PrometheusClient, exprs: Iterable[str]) -> Facts:
    """The facts about every selector of `exprs` (see the module); never raises BackendError:
    Prometheus failing is `Facts.error`."""
    selectors = await asyncio.to_thread(_unique_selectors, list(exprs))
    try:
        intervals = await _scrape_intervals(prom)
        matched, refused = await _matched(prom, selectors)
        missing = [s for s in selectors if matched.get(s.text) == frozenset()]
        names = await _names(prom, missing)
        values = await _label_values(prom, [s for s in missing if s.name in names])
    except BackendError as exc:
        return Facts(error=f"liveness not known: {exc.reason}: {exc.detail}")
    return Facts(
        matched=matched, names=names, label_values=values, intervals=intervals, refused=refused
    )


async def _matched(
    prom: PrometheusClient, selectors: list[Selector]
) -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """selector text → jobs of its series, and the selectors Prometheus refused."""
    matched: dict[str, frozenset[str]] = {}
    refused: set[str] = set()
    pending = list(_chunks([s.text for s in selectors], SELECTORS_PER_QUERY))
    spare = SPLIT_REQUESTS
    while pending:
        chunk = pending.pop(0)
        try:
            found = await _tagged_query(prom, [f"count by (job) ({text})" for text in chunk])
        except BackendError as exc:
            if exc.reason != "query error":
                raise
            # A selector this Prometheus does not read (a newer syntax) fails its batch:
            # halves are asked, within a bound; what is left stays unknown.
            if len(chunk) > 1 and spare >= 2:
                spare -= 2
                half = len(chunk) // 2
                pending[:0] = [chunk[:half], chunk[half:]]
            elif len(chunk) == 1:
                refused.add(chunk[0])
            continue
        for text, labels in zip(chunk, found, strict=True):
            matched[text] = frozenset(item.get("job", "") for item in labels)
    return matched, frozenset(refused)


async def _names(prom: PrometheusClient, missing: list[Selector]) -> frozenset[str]:
    wanted = sorted({n for s in missing if s.name for n in (s.name, *alternatives(s.name))})
    found: set[str] = set()
    for chunk in _chunks(wanted, NAMES_PER_QUERY):
        # Metric names are [a-zA-Z_:][a-zA-Z0-9_:]*: nothing in them to escape in a regex.
        expr = f'count by (__name__) ({{__name__=~"{"|".join(chunk)}"}})'
        found.update(s.labels.get("__name__", "") for s in await prom.query(expr))
    return frozenset(found)


async def _label_values(
    prom: PrometheusClient, missing: list[Selector]
) -> dict[tuple[str, str], tuple[str, ...]]:
    pairs = sorted({
        (s.name, label) for s in missing for label, op, _ in s.matchers
        if label != "__name__" and op in ("=", "=~")
    })  # fmt: skip
    values: dict[tuple[str, str], tuple[str, ...]] = {}
    for start in range(0, len(pairs), SELECTORS_PER_QUERY):
        chunk = pairs[start : start + SELECTORS_PER_QUERY]
        parts = [f'group by ({label}) ({{__name__="{name}"}})' for name, label in chunk]
        for pair, labels in zip(chunk, await _tagged_query(prom, parts), strict=True):
            values[pair] = tuple(sorted({item[pair[1]] for item in labels if pair[1] in item}))
    return values


def verdicts(exprs: Iterable[str], facts: Facts) -> dict[str, Liveness]:
    """expr → its verdict (pure; run it in a worker thread for many rules)."""
    return {expr: judge(expr, facts) for expr in dict.fromkeys(exprs)}


@dataclass
class LivenessCache:
    """Verdicts for a set of expressions, asked again when `ttl_s` old or the set changes.

    `current` gives the verdicts known now; `ensure` starts a round in the background when due
    (the board: it never waits), `wait_fresh` awaits one (the CLI)."""

    prom: PrometheusClient
    ttl_s: float = TTL_S
    asked_at: float = float("-inf")
    exprs: frozenset[str] = frozenset()
    known: dict[str, Liveness] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    def ensure(self, exprs: Iterable[str], now: float | None = None) -> None:
        wanted = frozenset(exprs)
        now = time.time() if now is None else now
        if self._task is not None and not self._task.done():
            return
        if wanted != self.exprs or now - self.asked_at >= self.ttl_s:
            self._task = asyncio.create_task(self._round(wanted, now))

    async def wait_fresh(self, exprs: Iterable[str], now: float | None = None) -> None:
        self.ensure(exprs, now)
        if self._task is not None:
            await self._task

    async def _round(self, wanted: frozenset[str], now: float) -> None:
        facts = await fetch_facts(self.prom, wanted)
        self.known = await asyncio.to_thread(verdicts, wanted, facts)
        self.exprs, self.asked_at = wanted, now

    async def settled(self) -> None:
        """Wait for the round in flight, if any (tests; the board never waits)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def current(self, expr: str) -> Liveness | None:
        return self.known.get(expr)

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
