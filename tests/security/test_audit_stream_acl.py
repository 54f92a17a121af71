"""Threat: an operator who rewrites the team audit Stream to match a rewritten local log.

The Stream anchors every operator's log only if operators cannot take entries out of it. The
shipped ACL (`deploy/redis/users.acl`) is loaded into a real redis-server, with passwords
added as an administrator would; as `oncall-operator` every way to remove or replace an entry
is denied with NOPERM, while everything oncall itself does (the guards' transactions, the
degradation flag, the probes' server commands, the XADD of a copy) still works, and
`oncall audit verify` reads the Stream as `oncall-reviewer`.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from oncall.audit.log import AuditLog
from oncall.backends.redis import RedisClient
from oncall.backends.redis_write import RedisWriter
from oncall.remediation.audit_mirror import mirror_to_stream
from tests.cli_runner import run_oncall
from tests.harness.servers import RunningServer, redis_server

ACL = Path(__file__).resolve().parents[2] / "deploy" / "redis" / "users.acl"
STREAM = "oncall:audit"
USERS = ("oncall-operator", "oncall-approver", "oncall-reviewer", "oncall-admin")
POD = {"kind": "Pod", "namespace": "ai", "name": "vllm-0", "uid": "6f1c"}


def password(user: str) -> str:
    return f"pw-{user}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningServer, dict[str, str]]]:
    """A redis-server on the shipped ACL file, each user given a password (`>secret`); one for
    the module (every test here leaves the Stream as it was, or appends to it)."""
    tmp_path = tmp_path_factory.mktemp("acl")
    secrets = {user: password(user) for user in USERS}
    text = ACL.read_text()
    for user, secret in secrets.items():
        text, count = re.subn(rf"^user {re.escape(user)} on ", f"user {user} on >{secret} ",
                              text, flags=re.MULTILINE)  # fmt: skip
        assert count == 1, f"{ACL} has no line for {user}"
    acl = tmp_path / "users.acl"
    acl.write_text(text)
    with redis_server(tmp_path / "redis", "--aclfile", str(acl)) as srv:
        yield srv, secrets


def connect(server: RunningServer, user: str, secret: str) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.port, username=user, password=secret)


def url_of(server: RunningServer, user: str, secret: str) -> str:
    return f"redis://{user}:{secret}@127.0.0.1:{server.port}/0"


DENIED: list[tuple[str, Callable[[redis.Redis], Any]]] = [
    ("XDEL", lambda r: r.xdel(STREAM, "1-0")),
    ("XTRIM", lambda r: r.xtrim(STREAM, maxlen=0)),
    ("XSETID", lambda r: r.execute_command("XSETID", STREAM, "1-0")),
    ("DEL", lambda r: r.delete(STREAM)),
    ("UNLINK", lambda r: r.unlink(STREAM)),
    ("RENAME", lambda r: r.rename(STREAM, "elsewhere")),
    ("RENAME onto", lambda r: r.rename("oncall:guard:x", STREAM)),
    ("EXPIRE", lambda r: r.expire(STREAM, 1)),
    ("PEXPIRE", lambda r: r.pexpire(STREAM, 1)),
    ("SET over it", lambda r: r.set(STREAM, "x")),
    ("COPY over it", lambda r: r.copy("oncall:guard:x", STREAM, replace=True)),
    ("RESTORE over it", lambda r: r.restore(STREAM, 0, b"x", replace=True)),
    ("FLUSHDB", lambda r: r.flushdb()),
    ("FLUSHALL", lambda r: r.flushall()),
    ("EVAL", lambda r: r.eval("return redis.call('DEL', KEYS[1])", 1, STREAM)),
    ("XGROUP", lambda r: r.xgroup_create(STREAM, "g", id="0")),
    ("ACL SETUSER", lambda r: r.acl_setuser("oncall-operator", enabled=True, commands=["+@all"])),
    ("CONFIG SET", lambda r: r.config_set("aclfile", "/tmp/x")),
    ("MIGRATE", lambda r: r.execute_command("MIGRATE", "127.0.0.1", "1", STREAM, 0, 100)),
    ("SWAPDB", lambda r: r.swapdb(0, 1)),
]


@pytest.mark.parametrize(("name", "command"), DENIED, ids=[name for name, _ in DENIED])
def test_the_operator_cannot_take_entries_out_of_the_stream(
    server: tuple[RunningServer, dict[str, str]], name: str, command: Callable[[redis.Redis], Any]
) -> None:
    srv, secrets = server
    operator = connect(srv, "oncall-operator", secrets["oncall-operator"])
    try:
        operator.xadd(STREAM, {"seq": "1", "hash": "h"})
        length = operator.xlen(STREAM)
        with pytest.raises(redis.exceptions.NoPermissionError):
            command(operator)
    finally:
        operator.close()
    admin = connect(srv, "oncall-admin", secrets["oncall-admin"])
    try:
        assert admin.xlen(STREAM) == length  # still there, whole
        assert admin.type(STREAM) == b"stream"
        assert admin.ttl(STREAM) == -1
    finally:
        admin.close()


def test_the_default_user_is_off(server: tuple[RunningServer, dict[str, str]]) -> None:
    srv, _ = server
    anonymous = redis.Redis(host="127.0.0.1", port=srv.port)
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            anonymous.xlen(STREAM)
    finally:
        anonymous.close()


def test_everything_oncall_does_is_still_allowed(
    server: tuple[RunningServer, dict[str, str]],
) -> None:
    """The guards' MULTI/EXEC and WATCH, the flag's SET, the probes, the copy's XADD."""
    srv, secrets = server
    url = url_of(srv, "oncall-operator", secrets["oncall-operator"])

    async def run() -> None:
        async with RedisClient(url, timeout=2.0) as client:
            writer = RedisWriter(client)
            await client.ping()
            assert "redis_version" in await client.info("server")
            await client.slowlog(5)
            await client.latency_latest()
            await client.config_get("maxclients")
            count = await writer.record_in_window(
                "oncall:guard:rate:Pod/ai/vllm-0", "m1", score=1.0, window_s=600
            )
            assert count == 1
            assert await client.zcount("oncall:guard:rate:Pod/ai/vllm-0", "-inf", "+inf") == 1
            await writer.set("oncall:guard:breaker:open", "{}", expire_s=60)
            await writer.replace_hash("oncall:approval:a1", {"requester": "alice"}, expire_s=60)
            assert await writer.claim_field("oncall:approval:a1", "approved_by", "bob")
            assert await client.hgetall("oncall:approval:a1") == {
                "requester": "alice",
                "approved_by": "bob",
            }
            assert await writer.delete("oncall:approval:a1")
            await writer.set("ai-gateway:degradation-level", "2")
            assert await client.get("ai-gateway:degradation-level") == "2"
            entry = await writer.xadd(STREAM, {"seq": "1", "hash": "h"})
            assert (await client.xrange(STREAM, start=entry))[0][0] == entry

    asyncio.run(run())


def test_verify_as_the_reviewer_over_copies_the_operator_wrote(
    tmp_path: Path, server: tuple[RunningServer, dict[str, str]]
) -> None:
    srv, secrets = server
    log = AuditLog(tmp_path / "audit.jsonl")

    async def write() -> None:
        url = url_of(srv, "oncall-operator", secrets["oncall-operator"])
        async with RedisClient(url, timeout=2.0) as client:
            for transition in ("proposed", "declined"):
                record = log.append(
                    action_id="a", transition=transition, action="rebuild-pod", target=POD
                )
                await mirror_to_stream(RedisWriter(client), STREAM, record)

    asyncio.run(write())
    reviewer = url_of(srv, "oncall-reviewer", secrets["oncall-reviewer"])
    result = run_oncall(
        "audit", "verify", "--set", f"audit.path={log.path}", "--set", f"redis.url={reviewer}",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    assert "OK: 2 records, chain intact" in result.stdout
    assert f"ANCHOR: the team Stream {STREAM}: 2 copies of log" in result.stdout
    assert secrets["oncall-reviewer"] not in result.stdout + result.stderr
    # The reviewer changes nothing, not even by XADD.
    client = connect(srv, "oncall-reviewer", secrets["oncall-reviewer"])
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.xadd(STREAM, {"seq": "3"})
    finally:
        client.close()


@pytest.mark.parametrize("who", ["anonymous", "wrong password", "a user the ACL denies INFO"])
def test_credentials_redis_refuses_are_auth_and_incomplete(
    tmp_path: Path, server: tuple[RunningServer, dict[str, str]], who: str
) -> None:
    """Issue 12, item 9, for Redis: NOAUTH, WRONGPASS and NOPERM are the reason `auth` (a
    probe's step unknown, exit 3), never a finding and never "all well"; the secret is not
    shown. The reviewer may read only the Stream, so its INFO is a NOPERM."""
    srv, secrets = server
    url = {
        "anonymous": f"redis://127.0.0.1:{srv.port}/0",
        "wrong password": url_of(srv, "oncall-operator", "not-" + secrets["oncall-operator"]),
        "a user the ACL denies INFO": url_of(srv, "oncall-reviewer", secrets["oncall-reviewer"]),
    }[who]
    result = run_oncall(
        "check", "AIServiceUnavailable", "-o", "json", "--set", f"redis.url={url}",
        "--set", "prometheus.url=http://127.0.0.1:1", "--set", "vllm.urls=http://127.0.0.1:1",
        "--set", "kubernetes.timeout=1s", cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 3, result.stdout + result.stderr
    steps = [s for s in json.loads(result.stdout)["steps"] if s["probe"] == "redis.stats"]
    assert steps and all(s["status"] == "unknown" for s in steps), steps
    assert all("redis at redis://" in s["reason"] and ": auth" in s["reason"] for s in steps)
    assert all(secret not in result.stdout + result.stderr for secret in secrets.values())
