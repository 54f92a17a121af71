"""The audit record's copy in the team Redis Stream: one XADD per record, never trimmed.

The entry is `anchor.stream_fields(record)`: the record's fields as text plus `log_id`, so the
cross-check of `oncall audit verify` finds a copy by log id + seq. No MAXLEN: trimming would
erase the anchor, and the shipped ACL (deploy/redis/) leaves operators XADD only on the key;
retention is the Redis administrator's, who keeps the entries-added counter honest.
"""

from __future__ import annotations

from oncall.audit.anchor import stream_fields
from oncall.audit.records import Record
from oncall.backends.redis import RedisClient
from oncall.backends.redis_write import RedisWriter


async def mirror_to_stream(writer: RedisWriter, stream: str, record: Record) -> str:
    """XADD stream * field value … for one record; the entry id Redis gave it."""
    return await writer.xadd(stream, stream_fields(record))


async def mirror_with_client(client: RedisClient, stream: str, record: Record) -> str:
    """The same through a read client's connection (for `oncall audit acknowledge`)."""
    return await mirror_to_stream(RedisWriter(client), stream, record)
