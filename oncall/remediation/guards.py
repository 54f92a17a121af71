"""The guards an action passes before it runs (docs/architecture.md §3, the write path).

Read-only mode, a per-target rate limit and a global circuit breaker (the two-person rule is in
oncall/remediation/two_person.py). The last two keep their state in Redis, so they survive a
restart of oncall and hold across every operator pointed at the same Redis:

    oncall:guard:rate:<target>      sorted set, one member per action STARTED, scored by time
    oncall:guard:breaker:failures   sorted set, one member per failed action (any target)
    oncall:guard:breaker:open       JSON {opened_at, cooldown_s, failures, targets}, TTL cooldown
    oncall:approval:<action_id>     the two-person rule's requests: oncall/remediation/two_person.py

`redis-cli ZRANGE oncall:guard:rate:<target> 0 -1 WITHSCORES`, `redis-cli GET
oncall:guard:breaker:open` and `redis-cli HGETALL oncall:approval:<id>` show them.

Guards FAIL CLOSED: when Redis does not answer, a check is a refusal ("guard state unavailable:
redis at …: timeout"), never a pass. A guard we cannot read is a guard we cannot vouch for, and
the moments Redis is sick are exactly the moments an operator is most tempted to act in a hurry.
The `record*` and `request` writes raise `BackendError`; the executor calls them before it acts
and treats an error as a refusal.

Times come from the Redis server's clock (`TIME`; docs/audit.md: each host's own clock
decided, so one running ahead saw the window over early): the state is shared between hosts,
and only one clock means the same thing to all of them; tests inject `clock` to move time
without sleeping. Redis TTLs only tidy keys away; every decision is made on that time.

Check-then-record is not atomic across operators; two operators acting on one target at the
same instant are kept apart by the per-target Kubernetes Lease, or, for the actions that take
none (silences, acknowledgements: `Action.unleased`), by their own atomic write or re-read,
not by these counters (which may then let one extra action past the limit).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar

from oncall.backends.redis import RedisClient
from oncall.backends.redis_write import RedisWriter
from oncall.errors import BackendError
from oncall.model.write_path import GuardVerdict
from oncall.settings.durations import format_duration
from oncall.settings.model import Settings

Clock = Callable[[], float]
GUARD_PREFIX = "oncall:guard"
APPROVAL_PREFIX = "oncall:approval"


def _unavailable(guard: str, exc: BackendError) -> GuardVerdict:
    """Fail closed: the refusal for a guard whose state could not be read."""
    return GuardVerdict(
        guard,
        False,
        f"guard state unavailable: {exc.backend} at {exc.target}: {exc.reason}",
        {"backend": exc.backend, "target": exc.target, "error": exc.reason, "info": exc.detail},
    )


def _wait_text(seconds: float) -> str:
    # Whole seconds, rounded up: "next allowed in 4m12s" must never be early.
    return format_duration(max(1, math.ceil(seconds)))


def read_only_guard(settings: Settings, *, flag: bool) -> GuardVerdict:
    """Refuse every action in read-only mode, from settings (`read_only: true`) or `--read-only`."""
    sources = [
        name
        for name, on in (("settings read_only: true", settings.read_only), ("--read-only", flag))
        if on
    ]
    if sources:
        reason = f"read-only mode ({' and '.join(sources)}): remediations are refused"
        return GuardVerdict("read-only", False, reason, {"sources": sources})
    return GuardVerdict("read-only", True, "not in read-only mode", {"sources": []})


def anchor_guard(settings: Settings) -> GuardVerdict:
    """The team anchor as a guard (docs/audit.md): a change runs only with its records
    copied to the team Stream, unless `audit.local_only` (itself in every preview and record)
    says otherwise. Whether the `started` copy is actually written is checked before execution.
    """
    audit = settings.audit
    if audit.redis_stream:
        reason = f"every record is copied to the team Stream {audit.redis_stream}"
        return GuardVerdict("anchor", True, reason, {"stream": audit.redis_stream})
    if audit.local_only:
        reason = (
            "LOCAL ONLY (audit.local_only: true): no team copy of this change — whoever can "
            "write the audit file can erase it"
        )
        return GuardVerdict("anchor", True, reason, {"stream": None, "local_only": True})
    reason = (
        "the team anchor is off (audit.redis_stream is empty): a change needs its Stream "
        "copy; audit.local_only: true runs it without one (and every record says so)"
    )
    return GuardVerdict("anchor", False, reason, {"stream": None, "local_only": False})


def two_person_note(settings: Settings, action: str) -> dict[str, Any]:
    """What the two-person policy was for this action, for the `proposed` record: an empty
    `guards.two_person` (`--set guards.two_person=[]`) is then on record, not silent."""
    names = list(settings.guards.two_person)
    return {"required": action in names, "actions": names}


@dataclass(eq=False, repr=False)  # no repr: it would print the clients
class RedisGuard:
    """What the guards that keep their state in Redis share: they read it through `client`,
    write it through `writer`, under keys that start with `prefix`, and decide on `clock`'s
    time (see the module docstring for why wall-clock)."""

    guard: ClassVar[str]

    client: RedisClient
    writer: RedisWriter
    _: KW_ONLY
    prefix: str = GUARD_PREFIX
    #: None: the Redis server's clock (TIME); a test's own clock otherwise.
    clock: Clock | None = None

    async def now(self) -> float:
        """The time decisions are made on: Redis TIME, or `clock`. Raises BackendError."""
        return self.clock() if self.clock is not None else await self.client.server_time()


@dataclass(eq=False, repr=False, kw_only=True)
class RateLimit(RedisGuard):
    """At most `actions` actions STARTED on one target within any `window_s` (sliding window)."""

    guard = "rate-limit"

    actions: int
    window_s: float

    def key(self, target: str) -> str:
        return f"{self.prefix}:rate:{target}"

    async def check(self, target: str) -> GuardVerdict:
        """Refused when `actions` actions already started on `target` within the window."""
        try:
            now = await self.now()
            # "(" makes the bound exclusive: an action exactly one window old has left it.
            started = await self.client.zrangebyscore(
                self.key(target), f"({now - self.window_s!r}", "+inf"
            )
        except BackendError as exc:
            return _unavailable(self.guard, exc)
        count = len(started)
        window = format_duration(self.window_s)
        detail: dict[str, Any] = {
            "target": target,
            "actions": count,
            "limit": self.actions,
            "window_s": self.window_s,
        }
        if count < self.actions:
            reason = (
                f"rate limit: {count} of {self.actions} actions on {target} in the last {window}"
            )
            return GuardVerdict(self.guard, True, reason, detail)
        # Allowed again once enough of the oldest leave the window to bring the count below
        # the limit: when the (count - actions + 1)-th oldest does.
        next_at = started[count - self.actions][1] + self.window_s
        detail["next_allowed_in_s"] = next_at - now
        reason = (
            f"rate limit: {count} actions on {target} in the last {window}; "
            f"next allowed in {_wait_text(next_at - now)}"
        )
        return GuardVerdict(self.guard, False, reason, detail)

    async def record(self, target: str) -> int:
        """Count one action started on `target` now; the actions in the window, this one included.

        Raises BackendError when Redis does not take it (the executor then does not act).
        """
        now = await self.now()
        member = f"{now!r} {uuid.uuid4().hex}"
        return await self.writer.record_in_window(
            self.key(target), member, score=now, window_s=self.window_s
        )


@dataclass(eq=False, repr=False, kw_only=True)
class CircuitBreaker(RedisGuard):
    """GLOBAL breaker: after `failures` failed actions (any targets) within `cooldown_s`, refuse
    every action until `cooldown_s` has passed since it opened.

    `record_success` is a no-op, on purpose: the breaker counts failures in a sliding window,
    not consecutive ones. A success on one target says little about the trouble that failed
    actions on others, and resetting on success would let an alternating fail/succeed pattern
    act without limit. Failures leave the count by age alone.
    """

    guard = "circuit-breaker"

    failures: int
    cooldown_s: float

    @property
    def failures_key(self) -> str:
        return f"{self.prefix}:breaker:failures"

    @property
    def open_key(self) -> str:
        return f"{self.prefix}:breaker:open"

    async def check(self) -> GuardVerdict:
        """Refused while the breaker is open."""
        try:
            now = await self.now()
            raw = await self.client.get(self.open_key)
            if raw is None:
                return GuardVerdict(self.guard, True, "circuit breaker closed", {})
            try:
                state = json.loads(raw)
                closes_in = float(state["opened_at"]) + float(state["cooldown_s"]) - now
                count = int(state["failures"])
            except (ValueError, KeyError, TypeError):
                # Written by someone else (or another version): still open while Redis keeps it.
                state = {"unreadable": raw}
                closes_in = await self.client.ttl(self.open_key) or self.cooldown_s
                count = self.failures
        except BackendError as exc:
            return _unavailable(self.guard, exc)
        if closes_in <= 0:
            # Closed by the clock; Redis drops the key on its own TTL.
            return GuardVerdict(self.guard, True, "circuit breaker closed", {})
        window = format_duration(float(state.get("cooldown_s", self.cooldown_s)))
        reason = (
            f"circuit breaker open: {count} actions failed within {window}; "
            f"closes in {_wait_text(closes_in)}"
        )
        return GuardVerdict(self.guard, False, reason, {**state, "closes_in_s": closes_in})

    async def record_failure(self, target: str, reason: str) -> bool:
        """Count one failed action; True when this failure opened (or re-opened) the breaker.

        A failure while already open (from an action that started before it opened) restarts
        the cooldown. Raises BackendError when Redis does not take it.
        """
        now = await self.now()
        member = json.dumps(
            {"id": uuid.uuid4().hex, "at": now, "target": target, "reason": reason[:200]}
        )
        count = await self.writer.record_in_window(
            self.failures_key, member, score=now, window_s=self.cooldown_s
        )
        if count < self.failures:
            return False
        recent = await self.client.zrangebyscore(
            self.failures_key, f"({now - self.cooldown_s!r}", "+inf"
        )
        targets = sorted({_failure_target(m) for m, _ in recent} - {""})
        state = {
            "opened_at": now,
            "cooldown_s": self.cooldown_s,
            "failures": count,
            "targets": targets,
            "last_reason": reason[:200],
        }
        await self.writer.set(self.open_key, json.dumps(state), expire_s=self.cooldown_s)
        return True

    async def record_success(self) -> None:
        """No-op (see the class docstring): successes neither reset the count nor close it."""
        return None


def _failure_target(member: str) -> str:
    try:
        return str(json.loads(member)["target"])
    except (ValueError, KeyError, TypeError):
        return ""
