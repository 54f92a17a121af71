"""The per-target Kubernetes Lease that keeps two operators off one target at a time.

The preview only reads who holds it (a person is not asked to confirm what would be refused);
the executor takes it after the confirmation and releases it when the action has ended. A Lease
left behind by a crash expires by itself after `guards.lease_duration`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from oncall.errors import BackendError
from oncall.model.write_path import GuardVerdict, Plan
from oncall.remediation.clients import Clients


def lease_name(plan: Plan) -> str:
    """A valid object name (RFC 1123 label) per target: oncall-pod-ai-vllm-x."""
    name = re.sub(r"[^a-z0-9-]+", "-", f"oncall-{plan.target.key}".lower())
    return name[:63].rstrip("-")


class TargetLease:
    """Read, take and release the Lease of a plan's target as `holder`."""

    def __init__(self, clients: Clients, holder: str) -> None:
        self.clients = clients
        self.holder = holder

    def _namespace(self, plan: Plan) -> str:
        return plan.target.namespace or self.clients.settings.kubernetes.namespace

    async def holder_verdict(self, plan: Plan) -> GuardVerdict:
        """For the preview: whether someone else holds the target's Lease now."""
        try:
            kube = await self.clients.kube_writer()
            held = await kube.lease_holder(self._namespace(plan), lease_name(plan))
        except BackendError as exc:
            return GuardVerdict("lease", False, f"cannot read the Lease: {exc}", {})
        now = datetime.now(UTC)
        if held is None or not held.holder or held.holder == self.holder:
            return GuardVerdict("lease", True, "free", {})
        if held.expires is None or held.expires <= now:
            return GuardVerdict("lease", True, f"free (expired, last held by {held.holder})", {})
        return _held_by(plan, held.holder, held.since)

    async def take(self, plan: Plan) -> GuardVerdict:
        duration = int(self.clients.settings.guards.lease_duration)
        try:
            kube = await self.clients.kube_writer()
            lease = await kube.acquire_lease(
                self._namespace(plan), lease_name(plan), self.holder, duration
            )
        except BackendError as exc:
            return GuardVerdict("lease", False, f"cannot take the Lease: {exc}", {})
        if lease.acquired:
            return GuardVerdict("lease", True, "held", {})
        return _held_by(plan, lease.holder, lease.since)

    async def release(self, plan: Plan) -> None:
        try:
            kube = await self.clients.kube_writer()
            await kube.release_lease(self._namespace(plan), lease_name(plan), self.holder)
        except BackendError:
            pass  # it expires by itself after guards.lease_duration


def _held_by(plan: Plan, holder: str | None, since: datetime | None) -> GuardVerdict:
    when = since.isoformat() if since else "unknown"
    return GuardVerdict(
        "lease", False, f"{holder} is acting on {plan.target.label} (since {when})",
        {"holder": holder, "since": when},
    )  # fmt: skip
