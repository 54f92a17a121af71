"""Fakes of what the executor talks to: the audit log in memory, the Redis-backed guards, and
the Kubernetes Lease calls; `make_world` puts a real `Remediator` over them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from oncall.backends.kube_leases import LeaseResult
from oncall.backends.kube_write import KubeWriter
from oncall.model.write_path import GuardVerdict
from oncall.remediation.clients import Clients
from oncall.remediation.executor import Remediator
from oncall.remediation.policy import Guards
from oncall.settings import Settings

ACTOR = {"user": "alice", "host": "bastion-1"}


@dataclass
class FakeLog:
    """The audit log in memory; notes the thread each append ran on."""

    path: str = "memory"
    lines: list[dict[str, Any]] = field(default_factory=list)
    threads: set[int] = field(default_factory=set)

    def append(self, **fields: Any) -> dict[str, Any]:
        self.threads.add(threading.get_ident())
        record = {"seq": len(self.lines) + 1, **fields}
        self.lines.append(record)
        return record

    def records(self) -> Iterator[dict[str, Any]]:
        return iter(list(self.lines))

    #: What `verify` reports: None is a chain that verifies.
    broken: str | None = None

    def verify(self) -> Any:
        problems = [self.broken] if self.broken else []
        return SimpleNamespace(ok=not problems, problems=problems)

    def transitions(self) -> list[str]:
        return [r["transition"] for r in self.lines]


@dataclass
class FakeRate:
    refuse: bool = False
    recorded: list[str] = field(default_factory=list)

    async def check(self, target: str) -> GuardVerdict:
        reason = "rate limit: too many" if self.refuse else "rate limit: 0 of 3"
        return GuardVerdict("rate-limit", not self.refuse, reason, {"target": target})

    async def record(self, target: str) -> int:
        self.recorded.append(target)
        return len(self.recorded)


@dataclass
class FakeBreaker:
    open: bool = False
    failures: list[tuple[str, str]] = field(default_factory=list)

    async def check(self) -> GuardVerdict:
        if self.open:
            return GuardVerdict("circuit-breaker", False, "circuit breaker open", {"failures": 3})
        return GuardVerdict("circuit-breaker", True, "circuit breaker closed", {})

    async def record_failure(self, target: str, reason: str) -> bool:
        self.failures.append((target, reason))
        return False

    async def record_success(self) -> None:
        return None


@dataclass
class FakeTwoPerson:
    actions: frozenset[str] = frozenset()
    approver: str | None = None
    requests: list[str] = field(default_factory=list)

    def required(self, action: str) -> bool:
        return action in self.actions

    async def request(
        self, action_id: str, action: str, target: str, requester: str, **shown: str
    ) -> None:
        self.requests.append(action_id)

    async def pending(
        self, action_id: str, approver: str
    ) -> tuple[dict[str, str], GuardVerdict | None]:
        return {"action": "set-note", "target": "note", "preview": "p", "confirm_word": "yes"}, None

    async def wait(self, action_id: str, *, timeout_s: float | None = None) -> GuardVerdict:
        if self.approver is None:
            return GuardVerdict("two-person", False, "no second person approved", {})
        detail = {"action_id": action_id, "approver": self.approver}
        return GuardVerdict("two-person", True, f"approved by {self.approver}", detail)

    async def approve(self, action_id: str, approver: str) -> GuardVerdict:
        return GuardVerdict("two-person", True, f"approved by {approver}", {})


@dataclass
class FakeLeases:
    """The Lease calls of KubeWriter; `held_by` is someone else's live Lease."""

    held_by: str | None = None
    taken: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    closed: bool = False
    #: Who SelfSubjectReview says we are.
    username: str = "alice"

    async def self_subject_review(self) -> dict[str, Any]:
        return {"status": {"userInfo": {"username": self.username, "groups": ["ops"]}}}

    def _theirs(self) -> LeaseResult:
        now = datetime.now(UTC)
        return LeaseResult(False, self.held_by, now, now + timedelta(seconds=60))

    async def lease_holder(self, namespace: str, name: str) -> LeaseResult | None:
        return self._theirs() if self.held_by else None

    async def acquire_lease(
        self, namespace: str, name: str, holder: str, duration_s: int
    ) -> LeaseResult:
        if self.held_by:
            return self._theirs()
        self.taken.append(f"{namespace}/{name}")
        return LeaseResult(True, holder, datetime.now(UTC), None)

    async def release_lease(self, namespace: str, name: str, holder: str) -> bool:
        self.released.append(f"{namespace}/{name}")
        return True

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.close()


@dataclass
class World:
    remediator: Remediator
    log: FakeLog
    rate: FakeRate
    breaker: FakeBreaker
    two_person: FakeTwoPerson
    leases: FakeLeases


def make_world(settings: Settings | None = None) -> World:
    """A remediator over fakes: no Redis Stream, no Kubernetes Events, a fake Lease API."""
    settings = settings or Settings.model_validate(
        {"audit": {"redis_stream": None, "kube_events": False, "local_only": True}}
    )
    log, rate, breaker, two = FakeLog(), FakeRate(), FakeBreaker(), FakeTwoPerson()
    leases = FakeLeases()
    clients = Clients(settings, kube=cast(KubeWriter, leases))
    remediator = Remediator(clients, log, Guards(rate, breaker, two), actor=ACTOR)
    return World(remediator, log, rate, breaker, two, leases)
