"""Verdicts for `oncall serve`, the app and `oncall verdicts`: run a firing's checklist and keep
what it found team-wide; read them back.

`check_firing` is the read path (docs/architecture.md §3) run for one alert instance of an
Alertmanager notification: the same runbook lookup as the app (`match:` included), the same engine
and probes, so the verdict is what `oncall check` would have printed at that moment. The verdict is
JSON (oncall/model/verdicts.py), redacted once here, before it is stored or sent anywhere, by the
one redaction of every output; proposals are kept as words, nothing actionable.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from oncall.backends import from_settings
from oncall.backends.verdicts import VerdictStore
from oncall.checklist.compiled import CompiledRunbook
from oncall.errors import ConfigError, OncallError, UsageError
from oncall.model.checklist_events import StepResult
from oncall.model.verdicts import CHECKED, RUNBOOK_BROKEN, Firing, Verdict
from oncall.probes.context import ProbeContext
from oncall.redaction import redact
from oncall.service.checklists import find_runbook, load_checked, stream_checklist
from oncall.settings import Settings

__all__ = [
    "AtFiringVerdicts",
    "VerdictReader",
    "VerdictStore",
    "check_firing",
    "store_from_settings",
]


def store_from_settings(settings: Settings) -> VerdictStore:
    """The verdict store in the Redis of `redis:` (where acks and the audit Stream live)."""
    serve = settings.serve
    return VerdictStore(
        from_settings.redis_client(settings.redis),
        retention_s=serve.verdict_retention,
        per_alert=serve.verdicts_per_alert,
    )


def runbook_of(settings: Settings, firing: Firing) -> Path | None:
    """The firing's runbook file, found as the app finds it; None when it has none."""
    try:
        return find_runbook(settings, firing.alert, firing.labels)
    except UsageError:
        return None


def verdict_id(firing: Firing, ran_at: float) -> str:
    """Short, sortable by time within a firing, unique across replicas in practice."""
    return f"{firing.key[:12]}-{int(ran_at * 1000):x}"


def base_verdict(firing: Firing, *, replica: str, status: str, ran_at: float) -> Verdict:
    return {
        "id": verdict_id(firing, ran_at),
        "firing": firing.key,
        "status": status,
        "context": firing.context,
        "alert": firing.alert,
        "fingerprint": firing.fingerprint,
        "starts_at": firing.starts_at,
        "labels": dict(firing.labels),
        "annotations": dict(firing.annotations),
        "generator_url": firing.generator_url,
        "received_at": firing.received_at,
        "ran_at": ran_at,
        "replica": replica,
        "steps": [],
        "proposals": [],
    }


def redacted(verdict: Verdict) -> Verdict:
    """The verdict through the one redaction, as JSON text: every string of it, facts included."""
    text = redact(json.dumps(verdict, ensure_ascii=False, default=str), keep_url_user=False)
    value: Verdict = json.loads(text)
    return value


def _load(path: Path, settings: Settings) -> tuple[bytes, CompiledRunbook]:
    return path.read_bytes(), load_checked(path, settings)


def _proposal_text(result: StepResult) -> list[dict[str, str]]:
    out = []
    for proposal in result.proposals:
        params = " ".join(f"{k}={v}" for k, v in proposal.params.items())
        text = f"{proposal.action} {params}: {proposal.title}".replace("  ", " ")
        out.append({"step": result.id, "action": proposal.action, "text": text})
    return out


async def check_firing(
    settings: Settings,
    firing: Firing,
    runbook_file: Path,
    *,
    replica: str,
    ctx: ProbeContext | None = None,
) -> Verdict:
    """Run the firing's checklist now; the verdict, redacted. A broken runbook is a verdict
    saying so (with its problems), never an exception: serve keeps going."""
    ran_at = time.time()
    try:
        # In a thread: parsing the runbook is file reading and CPU, off the event loop.
        content, runbook = await asyncio.to_thread(_load, runbook_file, settings)
    except (ConfigError, OSError) as exc:
        verdict = base_verdict(firing, replica=replica, status=RUNBOOK_BROKEN, ran_at=ran_at)
        verdict["runbook"] = str(runbook_file)
        verdict["error"] = str(exc)[:2000]
        return redacted(verdict)
    alert = {
        "name": firing.alert,
        "state": "firing",
        "value": None,
        "labels": dict(firing.labels),
        "annotations": dict(firing.annotations),
    }
    started = time.perf_counter()
    results: dict[str, StepResult] = {}
    async for event in stream_checklist(settings, runbook, alert, ctx=ctx):
        if isinstance(event, StepResult):
            results[event.id] = event
    ordered = [results[s.id] for s in runbook.spec.steps if s.id in results]
    verdict = base_verdict(firing, replica=replica, status=CHECKED, ran_at=ran_at)
    verdict.update(
        runbook=str(runbook.path),
        runbook_sha256=hashlib.sha256(content).hexdigest(),
        duration_s=round(time.perf_counter() - started, 3),
        finished_at=time.time(),
        steps=[r.to_json() for r in ordered],
        proposals=[p for r in ordered for p in _proposal_text(r)],
    )
    return redacted(verdict)


class VerdictReader:
    """What the app and `oncall verdicts` read: verdicts by alert, by id (raises BackendError)."""

    def __init__(self, store: VerdictStore) -> None:
        self.store = store

    @classmethod
    def from_settings(cls, settings: Settings) -> VerdictReader:
        return cls(store_from_settings(settings))

    async def list(
        self, *, alert: str | None = None, since: float = 0.0, limit: int = 200
    ) -> list[Verdict]:
        ids = await self.store.ids(alert=alert, since=since, limit=limit)
        return await self.store.get_many(ids)

    async def show(self, verdict_id: str) -> Verdict | None:
        return await self.store.get(verdict_id)

    async def at_firing(self, alert: str, *, context: str | None = None) -> Verdict | None:
        """The newest checked verdict of `alert` still firing (not resolved), of `context`."""
        for verdict in await self.list(alert=alert, limit=20):
            if verdict.get("status") != CHECKED or verdict.get("resolved_at"):
                continue
            if context is None or verdict.get("context") == context:
                return verdict
        return None

    async def aclose(self) -> None:
        await self.store.aclose()


def evidence_at_firing(verdict: Verdict, step: str | None = None) -> dict[str, Any]:
    """What an audit record of a remediation acted on from this verdict cites: the verdict,
    when it ran, and the evidence of its failing step (or of `step`)."""
    steps = verdict.get("steps") or []
    chosen = [s for s in steps if (s.get("id") == step if step else s.get("status") == "fail")]
    return {
        "verdict": verdict.get("id"),
        "ran_at": verdict.get("ran_at"),
        "steps": [
            {"id": s.get("id"), "status": s.get("status"), "summary": s.get("summary"),
             "evidence": s.get("evidence")}
            for s in chosen
        ],
    }  # fmt: skip


#: How long the app waits for the verdict store: decoration beside the live run, never a hold.
AT_FIRING_TIMEOUT_S = 2.0


class AtFiringVerdicts:
    """The app's reads of at-firing verdicts: one reader per context, each read bounded; a
    store that does not answer gives no verdict (the board shows the live run alone)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._readers: dict[str, VerdictReader] = {}

    def _reader(self, context: str) -> VerdictReader:
        reader = self._readers.get(context)
        if reader is None:
            own = self.settings
            if context in own.contexts:
                own = own.for_context(context)
            reader = self._readers[context] = VerdictReader.from_settings(own)
        return reader

    async def find(self, wanted: list[tuple[str, str, str]]) -> dict[str, Verdict]:
        """{key: verdict} for (key, context, alert) of firing alerts; those without one left out."""
        found: dict[str, Verdict] = {}
        for key, context, alert in wanted:
            try:
                async with asyncio.timeout(AT_FIRING_TIMEOUT_S):
                    verdict = await self._reader(context).at_firing(alert, context=context or None)
            except (TimeoutError, OncallError):
                continue
            if verdict is not None:
                found[key] = verdict
        return found

    async def aclose(self) -> None:
        for reader in self._readers.values():
            await reader.aclose()
