"""Kubernetes, mutating: coordination.k8s.io/v1 Leases, the remediations' "one at a time" lock.

`LeaseCalls` is the part of `KubeWriter` (oncall/backends/kube_write.py, which mixes it in) that
takes, reads and releases a Lease; remediation/lease.py decides which Leases a plan needs. Like
the rest of the writer, only the remediation layer may import this module (an import-linter
contract). kubectl equivalents: `kubectl get lease NAME -n NS -o json`, `kubectl create -f
lease.yaml`, `kubectl replace -f lease.yaml`, `kubectl delete lease NAME`.

The apiserver never expires a Lease: whether one is still held is the clients' computation
(renewTime + leaseDurationSeconds). Both sides of it are the apiserver's time, not this host's
(docs/audit.md: a clock 90 s ahead took a live Lease): the times written are this host's
clock moved by its offset from the apiserver's `Date` header (read on a GET of the Lease
itself), and "now" is the same, so two hosts whose clocks disagree agree on a Lease. Two
operators racing for one Lease are kept apart by the server's resourceVersion check, not by
that computation: one replace wins, the other gets 409 and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from oncall.backends.kube import Obj, apis
from oncall.errors import BackendError


@dataclass(frozen=True)
class LeaseResult:
    """The outcome of `acquire_lease`: ours now, or who holds it and since when."""

    acquired: bool
    holder: str | None
    since: datetime | None  # the holder's acquireTime
    expires: datetime | None  # renewTime + leaseDurationSeconds, by our clock
    previous_holder: str | None = None  # whose expired lease we took over
    detail: str = ""


class _Writes(Protocol):
    """What the Lease calls need of the writer they are mixed into (`KubeWriter`)."""

    async def _get(self, path: str, **params: Any) -> Obj: ...

    async def _write(self, method: str, path: str, body: Any) -> Obj: ...

    server_date: str | None


class LeaseCalls:
    """Take, read and release a Lease; mixed into `KubeWriter`, whose requests it sends."""

    async def acquire_lease(
        self: _Writes, namespace: str, name: str, holder: str, duration_s: int
    ) -> LeaseResult:
        """Take the Lease `name` for `holder`, or say who holds it.

        Create it; if it exists, held by someone else and not expired (renewTime +
        leaseDurationSeconds, by our clock), refuse. Expired or ours: replace it carrying its
        resourceVersion, so that of two operators racing only one wins (409 → refused).
        """
        current = await _read_lease(self, namespace, name)  # and the apiserver's time with it
        now = _now(self)
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration_s,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        body = {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
        expires = now + timedelta(seconds=duration_s)
        if current is None:
            try:
                await self._write("POST", _leases(namespace), body)
                return LeaseResult(True, holder, now, expires)
            except BackendError as exc:
                if exc.reason != "conflict":
                    raise
            current = await self._get(_leases(namespace, name))
            now = _now(self)
        held = _lease_view(current)
        ours = held.holder == holder
        theirs = not ours and bool(held.holder)
        if theirs and held.expires is not None and held.expires > now:
            return LeaseResult(False, held.holder, held.since, held.expires, detail="held")
        old_spec = current.get("spec") or {}
        spec["leaseTransitions"] = int(old_spec.get("leaseTransitions") or 0) + int(not ours)
        if ours and held.since is not None:
            spec["acquireTime"] = held.since  # a renewal keeps the original acquire time
        current["spec"] = {**old_spec, **spec}
        try:
            await self._write("PUT", _leases(namespace, name), current)
        except BackendError as exc:
            if exc.reason != "conflict":
                raise
            now_held = _lease_view(await self._get(_leases(namespace, name)))
            return LeaseResult(
                False, now_held.holder, now_held.since, now_held.expires, detail=exc.detail
            )
        return LeaseResult(
            True,
            holder,
            _micro_time(spec["acquireTime"]),
            expires,
            previous_holder=held.holder if theirs else None,
        )

    async def lease_holder(self: _Writes, namespace: str, name: str) -> LeaseResult | None:
        """Who holds the Lease `name`, since and until when (read only); None if there is none."""
        current = await _read_lease(self, namespace, name)
        return None if current is None else _lease_view(current)

    async def release_lease(self: _Writes, namespace: str, name: str, holder: str) -> bool:
        """Delete the Lease if `holder` holds it (resourceVersion precondition); else False."""
        current = await _read_lease(self, namespace, name)
        if current is None or (current.get("spec") or {}).get("holderIdentity") != holder:
            return False
        version = (current.get("metadata") or {}).get("resourceVersion")
        options = {"apiVersion": "v1", "kind": "DeleteOptions"}
        body = {**options, "preconditions": {"resourceVersion": version}} if version else options
        await self._write("DELETE", _leases(namespace, name), body)
        return True


async def _read_lease(kube: _Writes, namespace: str, name: str) -> Obj | None:
    try:
        lease: Obj = await kube._get(_leases(namespace, name))
    except BackendError as exc:
        if exc.reason == "not found":
            return None
        raise
    return lease


def _leases(namespace: str, *name: str) -> str:
    return apis("coordination.k8s.io/v1", namespace, "leases", *name)


def server_now(kube: object) -> datetime:
    """The apiserver's time now, as far as the last answer of `kube` (a KubeWriter) told."""
    return _now(kube)  # type: ignore[arg-type]


def _now(kube: _Writes | None = None) -> datetime:
    """The apiserver's time now: this host's clock moved by its offset from the `Date` of the
    last answer (just read); this host's alone only when there was none."""
    now = datetime.now(UTC)
    date = None if kube is None else getattr(kube, "server_date", None)
    if date:
        try:
            server = parsedate_to_datetime(date)
        except (TypeError, ValueError):
            server = None
        # Date has whole seconds: an offset under 1 s is rounding, not skew.
        if server is not None and server.tzinfo is not None:
            offset = server - now
            if abs(offset) >= timedelta(seconds=1):
                now += offset
    # MicroTime needs six fractional digits; isoformat() drops them when microsecond == 0.
    return now.replace(microsecond=now.microsecond or 1)


def _micro_time(value: Any) -> datetime | None:
    """A Lease's MicroTime (text or datetime) as an aware datetime; None when absent."""
    try:
        parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value or ""))
    except ValueError:
        return None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return parsed.replace(microsecond=parsed.microsecond or 1)


def _lease_view(lease: Obj) -> LeaseResult:
    """Who holds a Lease, since when, and until when (not acquired: a description)."""
    spec = lease.get("spec") or {}
    renewed = _micro_time(spec.get("renewTime")) or _micro_time(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    # The apiserver never expires a Lease: expiry is the clients' computation (clock skew!).
    # Without a renew time or a duration nothing proves it is held: it counts as expired.
    expires = renewed + timedelta(seconds=int(duration)) if renewed and duration else None
    return LeaseResult(
        False, spec.get("holderIdentity"), _micro_time(spec.get("acquireTime")), expires
    )
