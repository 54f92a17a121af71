"""The Kubernetes Leases that keep two processes off one target, and off one workload, at once.

A Lease is held by one *process*: the holder identity is the operator's authenticated identity,
the host, the pid and a random suffix (`holder_identity`), so two terminals of one operator, a
shared bastion account or a spoofed `$USER` are all different holders, and a Lease held by
another process under "my" name is not free. A plan's Leases are its target's and, when it
touches one, its workload's (a rebuilt pod's Deployment): two pods of one Deployment are not
rebuilt at once.

The preview only reads who holds them (a person is not asked to confirm what would be
refused); the executor takes them after the confirmation and releases them when the action has
ended — only if this process still holds them (re-read, compared, then deleted with a
resourceVersion precondition, oncall/backends/kube_leases.py), renewing them meanwhile
(`kept`). A Lease left behind by a crash expires by itself after `guards.lease_duration`;
its times are the apiserver's, not this host's (kube_leases).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import socket
from collections.abc import AsyncIterator
from datetime import datetime

from oncall.backends.kube_leases import server_now
from oncall.errors import BackendError
from oncall.model.write_path import GuardVerdict, Plan, Target
from oncall.remediation.clients import Clients


def holder_identity(identity: str) -> str:
    """identity@host/pid/random: unique per process (and per remediator within one)."""
    return f"{identity}@{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"


def lease_name(target: Plan | Target) -> str:
    """A valid object name (RFC 1123 label) per target: oncall-pod-ai-vllm-x."""
    key = target.target.key if isinstance(target, Plan) else target.key
    name = re.sub(r"[^a-z0-9-]+", "-", f"oncall-{key}".lower())
    return name[:63].rstrip("-")


class TargetLease:
    """Read, take and release the Leases of a plan's target and workload as `holder`."""

    def __init__(self, clients: Clients, holder: str) -> None:
        self.clients = clients
        self.holder = holder
        self._taken: list[Target] = []

    def _namespace(self, target: Target) -> str:
        return target.namespace or self.clients.settings.kubernetes.namespace

    async def holder_verdict(self, plan: Plan) -> GuardVerdict:
        """For the preview: whether another process holds one of the plan's Leases now."""
        notes = []
        for target in plan.lease_targets:
            try:
                kube = await self.clients.kube_writer()
                held = await kube.lease_holder(self._namespace(target), lease_name(target))
            except BackendError as exc:
                return GuardVerdict("lease", False, f"cannot read the Lease: {exc}", {})
            now = server_now(kube)  # the apiserver's clock, as the Lease's times are
            if held is None or not held.holder or held.holder == self.holder:
                continue
            if held.expires is None or held.expires <= now:
                notes.append(f"expired, last held by {held.holder}")
                continue
            return _held_by(target, held.holder, held.since)
        return GuardVerdict("lease", True, f"free ({'; '.join(notes)})" if notes else "free", {})

    async def take(self, plan: Plan) -> GuardVerdict:
        """Take every Lease of the plan, or none: on a refusal the ones taken are released."""
        duration = int(self.clients.settings.guards.lease_duration)
        for target in plan.lease_targets:
            try:
                kube = await self.clients.kube_writer()
                lease = await kube.acquire_lease(
                    self._namespace(target), lease_name(target), self.holder, duration
                )
            except BackendError as exc:
                await self.release(plan)
                return GuardVerdict("lease", False, f"cannot take the Lease: {exc}", {})
            if not lease.acquired:
                await self.release(plan)
                return _held_by(target, lease.holder, lease.since)
            self._taken.append(target)
        return GuardVerdict("lease", True, "held", {"holder": self.holder})

    @contextlib.asynccontextmanager
    async def kept(self, plan: Plan) -> AsyncIterator[None]:
        """Renew the Leases taken, every third of `guards.lease_duration`, for as long as the
        action runs and verifies (docs/audit.md: a second process patched the target while
        the first was still verifying, its Lease expired). Bounded by the action's own run."""
        duration = int(self.clients.settings.guards.lease_duration)

        async def renew() -> None:
            while True:
                await asyncio.sleep(max(duration / 3, 0.5))
                for target in list(self._taken):
                    with contextlib.suppress(BackendError):  # the next round tries again
                        kube = await self.clients.kube_writer()
                        await kube.acquire_lease(
                            self._namespace(target), lease_name(target), self.holder, duration
                        )

        renewing = asyncio.ensure_future(renew())
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def release(self, _plan: Plan) -> None:
        """Release the Leases this process took (only while it still holds them)."""
        while self._taken:
            target = self._taken.pop()
            try:
                kube = await self.clients.kube_writer()
                await kube.release_lease(self._namespace(target), lease_name(target), self.holder)
            except BackendError:
                pass  # it expires by itself after guards.lease_duration


def _held_by(target: Target, holder: str | None, since: datetime | None) -> GuardVerdict:
    when = since.isoformat() if since else "unknown"
    return GuardVerdict(
        "lease", False, f"{holder} is acting on {target.label} (since {when})",
        {"holder": holder, "since": when, "lease": lease_name(target)},
    )  # fmt: skip
