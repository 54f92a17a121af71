"""The revert watch: after a verified change to a managed Deployment, keep looking for a while
whether what owns it has put it back (docs/architecture.md §3, the write path).

An operator that `Owns()` its Deployments (vLLM production-stack's) reconciles on every change
and rebuilds the spec from its custom resource; Helm, Argo CD and Flux re-apply on their next
upgrade or sync. Each undoes a patch minutes after oncall said "verified" (or, reconciling at
once, during the rollout: then verification fails and the watch's first look says why). So once
a change to a Deployment the managed guard found an owner for (oncall/remediation/managed.py)
was made and its verification ended, `arm` sets a watch on the remediator, and the front end
runs `watch_and_record` WITHOUT waiting for it before showing the outcome (the app hands it to a
task; the CLI says it is watching and Ctrl-C stops it). The watch re-reads the Deployment every
few seconds until `guards.revert_watch` seconds have passed; when a value the plan set no longer
holds, it writes a `reverted` record (mirrored like every record) and says so. Bounded: at most
ceil(seconds / interval) + 1 reads, each with the client's own timeout.

What the plan set is read from its request, generically: a JSON patch's `replace`/`add` values
at their paths, or a merge patch's leaves. No action is asked anything.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncall.errors import BackendError
from oncall.model.patches import value_at
from oncall.model.write_path import Plan, Progress
from oncall.remediation.audit_trail import Run
from oncall.remediation.managed import GUARD, is_managed
from oncall.settings.durations import format_duration

if TYPE_CHECKING:
    from oncall.remediation.executor import Remediator

INTERVAL_S = 2.0
_SHOWN = 200  # characters of a value shown or recorded


@dataclass(frozen=True)
class Expected:
    """One value the change set: where (a JSON pointer into the Deployment) and what."""

    path: str
    value: Any


@dataclass(frozen=True)
class RevertWatch:
    """A watch armed after a verified change: which action, what it set, for how long."""

    action_id: str
    plan: Plan
    expected: tuple[Expected, ...]
    seconds: float
    managers: tuple[str, ...] = ()
    interval: float = INTERVAL_S


@dataclass(frozen=True)
class WatchResult:
    reverted: bool
    message: str
    changes: tuple[dict[str, Any], ...] = ()


def applied_values(plan: Plan) -> tuple[Expected, ...]:
    """What the plan's request sets: JSON patch `replace`/`add` ops (not appends: `-`), or a
    merge patch's leaf values."""
    body = (plan.request or {}).get("body")
    if isinstance(body, list):
        return tuple(
            Expected(str(op["path"]), op["value"])
            for op in body
            if isinstance(op, dict)
            and op.get("op") in ("replace", "add")
            and "value" in op
            and not str(op.get("path", "")).endswith("/-")
        )
    if isinstance(body, dict):
        return tuple(Expected(path, value) for path, value in _leaves(body, ""))
    return ()


def _leaves(obj: dict[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in obj.items():
        path = f"{prefix}/{str(key).replace('~', '~0').replace('/', '~1')}"
        if isinstance(value, dict) and value:
            yield from _leaves(value, path)
        else:
            yield path, value


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def undone(obj: dict[str, Any], expected: tuple[Expected, ...]) -> tuple[dict[str, Any], ...]:
    """Each value the change set that no longer holds in `obj`: path, set, now."""
    return tuple(
        {"path": e.path, "set": _short(e.value), "now": _short(value_at(obj, e.path))}
        for e in expected
        if value_at(obj, e.path) != e.value
    )


def arm(remediator: Remediator, run: Run) -> RevertWatch | None:
    """Set the remediator's watch for `run`, whose change was made and verified (or not), when
    its target is a managed Deployment, `guards.revert_watch` is on and the plan says what it
    set; else None."""
    seconds = float(remediator.settings.guards.revert_watch)
    plan = run.plan
    preview = run.preview
    managed = None if preview is None else next(
        (v for v in preview.verdicts if v.guard == GUARD), None
    )  # fmt: skip
    expected = applied_values(plan)
    if seconds <= 0 or plan.target.kind != "Deployment" or not is_managed(managed) or not expected:
        return None
    assert managed is not None  # is_managed said so
    names = tuple(str(m.get("name")) for m in managed.detail.get("managers") or ())
    watch = RevertWatch(run.action_id, plan, expected, seconds, names)
    remediator.revert_watch = watch
    return watch


async def watch(
    armed: RevertWatch,
    read: Callable[[], Any],
    say: Progress,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> WatchResult:
    """Re-read the target with `read` (an awaitable of the Deployment) every `interval` until a
    value the change set is undone or `seconds` have passed."""
    deadline = clock() + armed.seconds
    polls = math.ceil(armed.seconds / armed.interval) + 1
    failed: str | None = None
    for _ in range(polls):
        remaining = deadline - clock()
        if remaining <= 0:
            break
        await sleep(min(armed.interval, remaining))
        try:
            current = await read()
        except BackendError as exc:
            if failed is None:  # said once, not every poll
                say(f"the Deployment could not be read: {exc}")
            failed = str(exc)
            continue
        changes = undone(current, armed.expected)
        if changes:
            what = "; ".join(f"{c['path']}: {c['set']!r} -> {c['now']!r}" for c in changes)
            return WatchResult(True, f"REVERTED: {what}", changes)
    seen = "" if failed is None else f" (last read failed: {failed})"
    return WatchResult(False, f"not reverted within {format_duration(armed.seconds)}{seen}")


async def watch_and_record(remediator: Remediator, say: Progress) -> WatchResult | None:
    """Run the remediator's armed watch, if any; a revert is recorded as `reverted` (with who
    owns the target) and said. The remediator's clients must stay open until it returns."""
    armed = remediator.revert_watch
    if armed is None:
        return None
    remediator.revert_watch = None
    plan = armed.plan
    namespace, name = plan.target.namespace or "", plan.target.name
    by = ", ".join(armed.managers) or "its owner"
    say(f"watching {namespace}/{name} for a revert by {by} for {format_duration(armed.seconds)}")

    async def read() -> Any:
        kube = await remediator.clients.kube_writer()
        return await kube.get_deployment(namespace, name)

    result = await watch(armed, read, say)
    if result.reverted:
        await remediator._record_after(
            Run(armed.action_id, plan), say, "reverted", outcome=result.message,
            detail={"changes": list(result.changes), "managers": list(armed.managers),
                    "watched_s": armed.seconds},
        )  # fmt: skip
    say(result.message)
    return result
