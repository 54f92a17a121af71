"""The audit record's copies outside the local log: the team Redis Stream and Kubernetes Events.

The Stream entry is `anchor.stream_fields(record)`: the record's fields as text plus `log_id`,
so the cross-check of `oncall audit verify` finds a copy by log id + seq. No MAXLEN: trimming
would erase the anchor, and the shipped ACL (deploy/redis/) leaves operators XADD only on the
key; retention is the Redis administrator's, who keeps the entries-added counter honest.

For a Kubernetes target the executor also writes each transition as an Event on it
(`audit.kube_events`), so `kubectl describe` shows who did what. A copy that fails is a
problem to show, never fatal: the local record is written first and stays the evidence.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from oncall.audit.anchor import stream_fields
from oncall.audit.records import Record
from oncall.backends.redis import RedisClient
from oncall.backends.redis_write import RedisWriter
from oncall.errors import BackendError

if TYPE_CHECKING:  # only for annotations: `oncall audit acknowledge` needs no kube client
    from oncall.model.write_path import Plan
    from oncall.remediation.clients import Clients

MIRROR_TIMEOUT_S = 2.0


async def mirror_to_stream(writer: RedisWriter, stream: str, record: Record) -> str:
    """XADD stream * field value … for one record; the entry id Redis gave it."""
    return await writer.xadd(stream, stream_fields(record))


async def mirror_with_client(client: RedisClient, stream: str, record: Record) -> str:
    """The same through a read client's connection (for `oncall audit acknowledge`)."""
    return await mirror_to_stream(RedisWriter(client), stream, record)


async def anchor_record(clients: Clients, record: Record) -> str | None:
    """Copy a record to the team Stream within MIRROR_TIMEOUT_S; why it failed, else None
    (also None with no Stream configured: `guards.anchor_guard` decides whether that may run).
    """
    stream = clients.settings.audit.redis_stream
    if not stream:
        return None
    try:
        async with asyncio.timeout(MIRROR_TIMEOUT_S):
            await mirror_to_stream(clients.redis_writer(), stream, record)
    except (BackendError, TimeoutError) as exc:
        return f"record {record['seq']}: {str(exc) or type(exc).__name__}"
    return None


async def mirror_record(
    clients: Clients, record: Record, plan: Plan, holder: str, *, stream: bool = True
) -> str | None:
    """Copy one of the executor's records to the Stream (unless `stream` is False: copied
    already) and as an Event on the plan's target, as the settings ask, within
    MIRROR_TIMEOUT_S; the problem when a copy failed, else None."""
    audit = clients.settings.audit
    try:
        async with asyncio.timeout(MIRROR_TIMEOUT_S):
            if audit.redis_stream and stream:
                await mirror_to_stream(clients.redis_writer(), audit.redis_stream, record)
            if audit.kube_events and plan.target.namespace:
                kube = await clients.kube_writer()
                message = f"oncall {record['transition']}: {plan.summary} by {holder}"
                await kube.create_event(
                    plan.target.namespace,
                    {"kind": plan.target.kind, "name": plan.target.name,
                     "uid": plan.target.uid or "",
                     "apiVersion": "apps/v1" if plan.target.kind == "Deployment" else "v1"},
                    reason=f"Oncall{record['transition'].title().replace('_', '')}",
                    message=message[:1000],
                )  # fmt: skip
    except (BackendError, TimeoutError) as exc:
        return f"record {record['seq']}: {exc}"
    return None
