"""Threat: an operator who can write the local audit log rewrites it so that it checks out.

Issue 12, item 6: each attack below made `oncall audit verify` say OK before the chain was
anchored in the team Stream. Here every record is written the way the executor writes it (the
fsynced append, then the XADD of `remediation/audit_mirror.py`) to a real redis-server, the
file is then tampered with as a person with write access would (the head file rewritten to
match), and the real `oncall audit verify` must report it and exit 1. With the Stream
unreachable it must say that only the local chain was checked and exit 3.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from oncall.audit.log import AuditLog
from oncall.audit.records import GENESIS, line_of, record_hash
from oncall.backends.redis import RedisClient
from oncall.backends.redis_write import RedisWriter
from oncall.remediation.audit_mirror import mirror_to_stream
from tests.cli_runner import Result, run_oncall
from tests.harness.processes import free_port
from tests.harness.servers import RunningServer

POD = {"kind": "Pod", "namespace": "ai", "name": "vllm-0", "uid": "6f1c"}
CYCLE = ("proposed", "approved", "started", "succeeded", "verified")
N = 10


def write_anchored(log: AuditLog, url: str, stream: str, count: int = N) -> list[dict[str, Any]]:
    """`count` records appended and copied to the Stream, as the executor does it."""

    async def run() -> list[dict[str, Any]]:
        out = []
        async with RedisClient(url, timeout=2.0) as client:
            writer = RedisWriter(client)
            for i in range(count):
                record = log.append(
                    action_id=f"act-{i // len(CYCLE)}", transition=CYCLE[i % len(CYCLE)],
                    action="rebuild-pod", target=POD,
                    outcome="replacement Ready" if CYCLE[i % len(CYCLE)] == "succeeded" else None,
                )  # fmt: skip
                await mirror_to_stream(writer, stream, record)
                out.append(record)
        return out

    return asyncio.run(run())


def rewrite(log: AuditLog, records: list[dict[str, Any]]) -> None:
    """Write `records` as the whole log with seq, prev and hash recomputed, and a head file to
    match: what someone with write access and this source code can do."""
    prev, out = GENESIS, b""
    for seq, given in enumerate(records, start=1):
        last = {**given, "seq": seq, "prev": prev}
        last["hash"] = record_hash(last)
        prev, out = last["hash"], out + line_of(last)
    log.path.write_bytes(out)
    head = {"seq": last["seq"], "hash": last["hash"], "log_id": last["log"]["id"]}
    log.head_path.write_text(json.dumps(head) + "\n")


def verify(log: AuditLog, url: str, stream: str) -> Result:
    return run_oncall(
        "audit", "verify", "--set", f"audit.path={log.path}", "--set", f"redis.url={url}",
        "--set", f"audit.redis_stream={stream}", cwd=log.path.parent,
    )  # fmt: skip


@pytest.fixture
def stream() -> str:
    """A Stream of the test's own on the shared server: other tests' copies stay apart."""
    return f"oncall:audit:test:{uuid.uuid4().hex[:8]}"


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    return AuditLog(tmp_path / "audit.jsonl")


@dataclass
class Anchored:
    """A log of N records, each copied to the test's Stream as the executor does it."""

    log: AuditLog
    url: str
    stream: str
    written: list[dict[str, Any]]

    @property
    def log_id(self) -> str:
        return str(self.written[0]["log"]["id"])

    def verify(self) -> Result:
        return verify(self.log, self.url, self.stream)

    def rewritten(self, records: list[dict[str, Any]]) -> Result:
        """Rewrite the log as `records`, its local chain and head consistent, then verify it:
        the local chain alone is fooled (that was the bug); the Stream must catch it (exit 1)."""
        rewrite(self.log, records)
        assert self.log.verify().ok
        result = self.verify()
        assert result.code == 1
        return result


@pytest.fixture
def anchored(log: AuditLog, redis_srv: RunningServer, stream: str) -> Anchored:
    return Anchored(log, redis_srv.url, stream, write_anchored(log, redis_srv.url, stream))


def test_an_untouched_log_is_anchored(anchored: Anchored) -> None:
    result = anchored.verify()
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"OK: {N} records, chain intact",
        f"ANCHOR: the team Stream {anchored.stream}: {N} copies of log {anchored.log_id}",
    ]


def test_an_edit_with_every_later_hash_recomputed(anchored: Anchored) -> None:
    records = [dict(r) for r in anchored.written]
    records[3]["outcome"] = "nothing happened"
    result = anchored.rewritten(records)
    # Record 4's hash changed, and so did every later one's (each chains on the one before).
    expected = f"records 4–{N} of log {anchored.log_id}: not as the team Stream has it"
    assert expected in result.stdout
    assert "chain is broken" in result.stderr


def test_cut_off_the_end_with_the_head_rewritten(anchored: Anchored) -> None:
    result = anchored.rewritten(anchored.written[:6])
    expected = f"records 7–{N} of log {anchored.log_id}: in the team Stream but not in the file"
    assert expected in result.stdout


def test_one_forged_record_appended(anchored: Anchored) -> None:
    forged = {**anchored.written[-1], "transition": "declined", "outcome": "never ran"}
    result = anchored.rewritten([*anchored.written, forged])
    expected = f"record {N + 1} of log {anchored.log_id}: in the file but not in the team Stream"
    assert expected in result.stdout
    assert "records 1–" not in result.stdout  # the genuine ones still match


def test_log_and_head_deleted(anchored: Anchored) -> None:
    log = anchored.log
    log.path.unlink()
    log.head_path.unlink()
    assert log.verify().ok  # "OK: 0 records" locally: that was the bug
    result = anchored.verify()
    assert result.code == 1
    assert "OK:" not in result.stdout
    assert f"log {anchored.log_id} of this account" in result.stdout
    assert f"{N} records up to record {N}" in result.stdout
    assert f"was at {log.path}" in result.stdout
    assert "deleted or replaced" in result.stdout


def test_log_replaced_by_a_fresh_one(log: AuditLog, redis_srv: RunningServer, stream: str) -> None:
    """Deleted, then new actions written: the new log is anchored, the old one is missed."""
    old = write_anchored(log, redis_srv.url, stream)
    log.path.unlink()
    log.head_path.unlink()
    new = write_anchored(AuditLog(log.path), redis_srv.url, stream, count=3)
    assert new[0]["log"]["id"] != old[0]["log"]["id"]
    result = verify(log, redis_srv.url, stream)
    assert result.code == 1
    assert f"log {old[0]['log']['id']} of this account" in result.stdout
    assert f"3 copies of log {new[0]['log']['id']}" in result.stdout


def test_a_record_removed_and_the_rest_renumbered(anchored: Anchored) -> None:
    written, log_id = anchored.written, anchored.log_id
    result = anchored.rewritten([*written[:4], *written[5:]])
    assert f"records 5–{N - 1} of log {log_id}: not as the team Stream has it" in result.stdout
    assert f"record {N} of log {log_id}: in the team Stream but not in the file" in result.stdout


def test_two_operators_logs_share_the_stream_without_colliding(
    tmp_path: Path, redis_srv: RunningServer, stream: str
) -> None:
    """Both logs have records 1–N; their copies are told apart by log id, not by seq."""
    alice = AuditLog(tmp_path / "alice" / "audit.jsonl")
    bob = AuditLog(tmp_path / "bob" / "audit.jsonl")
    write_anchored(alice, redis_srv.url, stream)
    write_anchored(bob, redis_srv.url, stream)
    for each in (alice, bob):
        result = verify(each, redis_srv.url, stream)
        assert result.code == 0, result.stdout
        assert f"{N} copies of log" in result.stdout


def test_a_trimmed_stream_is_reported(log: AuditLog, redis_srv: RunningServer, stream: str) -> None:
    """XADD … MAXLEN is an XADD: the ACL cannot tell it apart, XINFO's counter can."""
    import redis

    write_anchored(log, redis_srv.url, stream)
    client = redis.Redis.from_url(redis_srv.url)
    try:
        client.xadd(stream, {"note": "trim"}, maxlen=3, approximate=False)
    finally:
        client.close()
    result = verify(log, redis_srv.url, stream)
    assert result.code == 1
    assert f"the team Stream {stream} has lost {N + 1 - 3} of its {N + 1} entries" in result.stdout


def test_the_stream_unreachable_checks_only_the_local_chain(log: AuditLog, stream: str) -> None:
    log.append(action_id="a", transition="proposed", action="rebuild-pod", target=POD)
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    result = verify(log, nobody, stream)
    assert result.code == 3, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "LOCAL CHAIN INTACT: 1 record; not anchored, so not proven"
    assert lines[1].startswith(f"LOCAL ONLY: the team Stream {stream} is unreachable")
    assert lines[1].endswith("only the local chain was checked")
    # A problem the local chain shows is found whatever the Stream: exit 1, not 3.
    log.path.write_bytes(log.path.read_bytes().replace(b"vllm-0", b"vllm-1"))
    result = verify(log, nobody, stream)
    assert result.code == 1
    assert "LOCAL ONLY" in result.stdout


def test_a_backdated_record_forged_into_both_is_flagged_by_its_arrival(
    log: AuditLog, redis_srv: RunningServer, stream: str
) -> None:
    """Someone who can XADD (an operator) forges a record in the file and in the Stream: the
    Stream's entry id is Redis's clock at arrival, which a backdated record cannot match."""
    written = write_anchored(log, redis_srv.url, stream)
    forged = {**written[-1], "transition": "declined", "ts": "2026-01-01T00:00:00.000Z"}
    rewrite(log, [*written, forged])
    last = json.loads(log.path.read_bytes().splitlines()[-1])

    async def smuggle() -> None:
        async with RedisClient(redis_srv.url, timeout=2.0) as client:
            await mirror_to_stream(RedisWriter(client), stream, last)

    asyncio.run(smuggle())
    result = verify(log, redis_srv.url, stream)
    assert result.code == 1
    assert f"record {N + 1} of log {written[0]['log']['id']}: reached the team Stream more" in (
        result.stdout
    )


def _screen_settings(log: AuditLog, url: str, stream: str) -> Any:
    from oncall.settings import Settings

    return Settings.model_validate(
        {"audit": {"path": str(log.path), "redis_stream": stream}, "redis": {"url": url}}
    )


@pytest.mark.parametrize("case", ["untouched", "edited and rehashed", "stream unreachable"])
async def test_the_audit_screen_says_what_verify_says(
    log: AuditLog, redis_srv: RunningServer, stream: str, case: str
) -> None:
    """The app's audit screen reads the same cross-check as `oncall audit verify`: a log
    rewritten to check out locally is BROKEN there too, an untouched one names its anchor,
    and without the Stream it says plainly that only the local chain was checked."""
    from oncall.service.audit_view import LiveAudit
    from tests.tui.test_audit_screen import audit_app, open_audit, text_of

    records = await asyncio.to_thread(write_anchored, log, redis_srv.url, stream, 5)
    if case == "edited and rehashed":
        rewrite(log, [{**records[0], "outcome": "nothing happened"}, *records[1:]])
    url = f"redis://127.0.0.1:{free_port()}/0" if case == "stream unreachable" else redis_srv.url
    settings = _screen_settings(log, url, stream)
    app = audit_app(LiveAudit(settings), settings=settings)
    async with app.run_test(size=(160, 30)) as pilot:
        chain = text_of(await open_audit(pilot), "#audit-chain")
    if case == "untouched":
        assert "✓ chain intact: 5 records" in chain
        assert f"anchor: the team Stream {stream}: 5 copies of log" in chain
    elif case == "edited and rehashed":
        assert "✗ BROKEN: records 1–5 of log" in chain and "✓" not in chain
        assert "not as the team Stream has it" in chain
    else:
        assert "✓ chain intact: 5 records" in chain
        assert f"? local chain only: the team Stream {stream} is unreachable" in chain
