"""`oncall incident list|show|export` and `oncall note` as an engineer runs them (subprocesses)
against a real redis-server and Prometheus: an unknown id, a note audited and redacted, a
tampered record named by the draft, Prometheus without history, Prometheus unreachable."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import redis

from oncall.backends.incidents import IncidentStore
from oncall.backends.redis import RedisClient
from oncall.model.incidents import Incident
from tests.cli_runner import Result, run_oncall
from tests.harness.faults import refused_port
from tests.harness.servers import RunningServer
from tests.incidents.inputs import incident

SECRET = "hunter2-Pa55word"


def put(url: str, one: Incident) -> None:
    async def write() -> None:
        store = IncidentStore(RedisClient(url, timeout=2))
        try:
            await store.put(one)
        finally:
            await store.aclose()

    asyncio.run(write())


@pytest.fixture
def env(tmp_path: Path, redis_srv: RunningServer, prometheus_srv: RunningServer) -> list[str]:
    redis.Redis.from_url(redis_srv.url).flushdb()
    (tmp_path / "oncall.yaml").write_text(
        f"alertmanager:\n  url: http://127.0.0.1:{refused_port()}\n  bearer_token: {SECRET}\n"
    )  # a configured secret, masked wherever it appears
    return [
        "--config", str(tmp_path / "oncall.yaml"),
        "--set", f"redis.url={redis_srv.url}", "--set", f"prometheus.url={prometheus_srv.url}",
        "--set", f"audit.path={tmp_path / 'audit.jsonl'}", "--set", "audit.redis_stream=",
    ]  # fmt: skip


def oncall(env: list[str], *args: str) -> Result:
    result = run_oncall(*args, *env)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_unknown_incident_is_a_clear_error(env: list[str], tmp_path: Path) -> None:
    for args in (("incident", "show", "inc-0000000000"), ("incident", "export", "inc-0000000000"),
                 ("note", "inc-0000000000", "looking")):  # fmt: skip
        result = oncall(env, *args)
        assert result.code == 2, result
        assert "no incident 'inc-0000000000' in Redis" in result.stderr
        assert "oncall incident list" in result.stderr
    assert not (tmp_path / "audit.jsonl").exists()  # a note on nothing is not recorded


def test_note_export_and_tampering(
    env: list[str], tmp_path: Path, redis_srv: RunningServer
) -> None:
    one = incident(time.time())
    put(redis_srv.url, one)
    listed = oncall(env, "incident", "list", "-o", "json")
    assert listed.code == 0
    assert [i["id"] for i in json.loads(listed.stdout)["incidents"]] == [one.id]

    for text in ("", "x" * 2001):
        refused = oncall(env, "note", one.id, text)
        assert refused.code == 2 and "note" in refused.stderr
    noted = oncall(env, "note", one.id, "restarted the gateway with Bearer abc.def.ghi and",
                   SECRET)  # fmt: skip
    assert noted.code == 0, noted.stderr
    assert "the team Stream did not get the note: audit.redis_stream is off" in noted.stderr
    [record] = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert (record["action"], record["transition"]) == ("incident-note", "noted")
    assert record["target"] == {"kind": "Incident", "name": one.id}
    text = record["detail"]["text"]
    assert "abc.def.ghi" not in text and SECRET not in text and "restarted the gateway" in text
    assert f"record 1 ({record['id']})" in noted.stdout
    verify = oncall(env, "audit", "verify")
    assert verify.stdout.startswith("LOCAL CHAIN INTACT: 1 record"), verify.stdout

    # The test's Prometheus evaluates none of these alerts: no ALERTS history, said so.
    export = oncall(env, "incident", "export", one.id, "-o", "markdown")
    assert export.code == 0, export.stderr
    assert "Prometheus holds no ALERTS history of LLMHighP99Latency" in export.stdout
    assert f"[record {record['id']}, seq 1]" in export.stdout
    assert "Local chain intact (1 records), not anchored" in export.stdout
    shown = oncall(env, "incident", "show", one.id, "-o", "json")
    assert shown.code == 0 and json.loads(shown.stdout)["chain"]["status"] == "local-only"

    # An edited note: the draft says at its top which record it cannot vouch for, exit 1.
    path = tmp_path / "audit.jsonl"
    path.write_text(path.read_text().replace("restarted the gateway", "did nothing at all"))
    tampered = oncall(env, "incident", "export", one.id)
    assert tampered.code == 1, tampered.stderr
    top = tampered.stdout.split("## Summary")[0]
    assert "FAILED verification" in top and f"seq 1 ({record['id']})" in top
    assert "did nothing at all" in tampered.stdout and "NOT VOUCHED" in tampered.stdout
    assert oncall(env, "audit", "verify").code == 1  # and verify agrees


def test_prometheus_unreachable_leaves_a_named_gap(
    env: list[str], redis_srv: RunningServer
) -> None:
    one = incident(time.time(), closed=False)
    put(redis_srv.url, one)
    down = [*env, "--set", f"prometheus.url=http://127.0.0.1:{refused_port()}"]  # the last wins
    export = oncall(down, "incident", "export", one.id)
    assert export.code == 3, export.stderr
    assert "**Incomplete:** Prometheus' ALERTS history could not be read" in export.stdout
    assert "- Status: ongoing (still open)" in export.stdout


def test_a_note_is_copied_to_the_team_stream_and_verify_says_ok(
    env: list[str], redis_srv: RunningServer
) -> None:
    one = incident(time.time())
    put(redis_srv.url, one)
    anchored = [*env, "--set", "audit.redis_stream=oncall:test-notes"]
    noted = oncall(anchored, "note", one.id, "paged the vLLM owners")
    assert noted.code == 0 and noted.stderr == "", noted.stderr
    assert redis.Redis.from_url(redis_srv.url).xlen("oncall:test-notes") == 1
    verify = oncall(anchored, "audit", "verify")
    assert verify.code == 0 and verify.stdout.startswith("OK: 1 record, chain intact"), verify
    export = oncall(anchored, "incident", "export", one.id, "-o", "json")
    chain = json.loads(export.stdout)["chain"]
    assert export.code == 0 and chain["status"] == "intact" and chain["count"] == 1


def test_a_verdict_of_an_earlier_episode_is_not_this_incidents(
    env: list[str], redis_srv: RunningServer
) -> None:
    """The draft reads the at-firing verdicts of its alerts from before it opened (its
    records' grace); one that ran before its alert first fired here is of an earlier firing
    of the same alert, and is left out (it was, in the drill: a firing five minutes earlier)."""
    from oncall.backends.verdicts import VerdictStore
    from tests.incidents.inputs import verdict

    now = time.time()
    one = incident(now)
    put(redis_srv.url, one)
    ours = {**verdict(now), "firing": "f-now"}  # ran 5 s after its first firing
    earlier = {**verdict(now), "id": "old999-18f", "firing": "f-old", "ran_at": now - 590}

    async def write() -> None:
        store = VerdictStore(RedisClient(redis_srv.url, timeout=2))
        try:
            for v in (earlier, ours):
                await store.put(v)
        finally:
            await store.aclose()

    asyncio.run(write())
    shown = oncall(env, "incident", "show", one.id, "-o", "json")
    assert shown.code in (0, 3), shown.stderr
    events = json.loads(shown.stdout)["events"]
    verdicts = [e for e in events if e["kind"] == "verdict"]
    assert len(verdicts) == 1 and "abc123-18f" in verdicts[0]["text"], verdicts
