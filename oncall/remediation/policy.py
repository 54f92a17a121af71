"""The policy guards the executor consults, as one bundle it is handed (`Guards`).

`Guards.from_settings` builds the Redis-backed guards of oncall/remediation/guards.py; the
protocols below are all the executor needs of them, so a unit test hands it fakes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from oncall.model.write_path import GuardVerdict
from oncall.remediation.clients import Clients
from oncall.remediation.guards import CircuitBreaker, RateLimit
from oncall.remediation.two_person import TwoPersonRule
from oncall.settings import Settings

APPROVAL_TIMEOUT_S = 120.0


class RateGuard(Protocol):
    async def check(self, target: str) -> GuardVerdict: ...

    async def record(self, target: str) -> int: ...


class BreakerGuard(Protocol):
    async def check(self) -> GuardVerdict: ...

    async def record_failure(self, target: str, reason: str) -> bool: ...

    async def record_success(self) -> None: ...


class ApprovalGuard(Protocol):
    def required(self, action: str) -> bool: ...

    async def request(
        self, action_id: str, action: str, target: str, requester: str, **shown: str
    ) -> None: ...

    async def pending(
        self, action_id: str, approver: str
    ) -> tuple[dict[str, str], GuardVerdict | None]: ...

    async def wait(self, action_id: str, *, timeout_s: float | None = None) -> GuardVerdict: ...

    async def approve(self, action_id: str, approver: str) -> GuardVerdict: ...


@dataclass(frozen=True)
class Guards:
    """Rate limit per target, the global circuit breaker and the two-person rule."""

    rate: RateGuard
    breaker: BreakerGuard
    two_person: ApprovalGuard

    @classmethod
    def from_settings(cls, settings: Settings, clients: Clients) -> Guards:
        guards = settings.guards
        redis, writer = clients.redis_client(), clients.redis_writer()
        return cls(
            RateLimit(
                redis, writer, actions=guards.rate_limit_actions, window_s=guards.rate_limit_window
            ),
            CircuitBreaker(
                redis, writer, failures=guards.breaker_failures, cooldown_s=guards.breaker_cooldown
            ),
            TwoPersonRule(
                redis, writer, actions=frozenset(guards.two_person), timeout_s=APPROVAL_TIMEOUT_S,
                grant_writer=clients.approval_writer(),
            ),
        )  # fmt: skip
