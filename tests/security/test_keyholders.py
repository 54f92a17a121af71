"""Threat: the people who hold the keys (issue 29, the write path): an operator who approves
their own action, switches the team anchor off, or writes into another's evidence.

Against a real redis-server on the shipped ACL (`deploy/redis/users.acl`, the `server` of
test_audit_stream_acl.py), the drill's Kubernetes API, and the real `oncall` command. Each test
names its item of the issue; tests/security/README.md maps them.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from oncall.backends.redis import RedisClient
from oncall.backends.redis_write import RedisWriter
from oncall.model.write_path import Preview
from oncall.remediation.executor import Remediator
from oncall.remediation.two_person import TwoPersonRule
from oncall.settings import Settings
from oncall.settings.model import AuditSettings
from oncall_drill.kube_sim.kubeconfig import PEER_CONTEXT
from tests.cli_runner import run_oncall
from tests.drill.kube.conftest import NS, Cluster
from tests.harness.servers import RunningServer
from tests.security.test_audit_stream_acl import connect, server, url_of

__all__ = ["server"]  # the module's redis-server on the shipped ACL, as a fixture here too

Server = tuple[RunningServer, dict[str, str]]
LEVEL = "ai-gateway:degradation-level"
POD = "Pod ai/vllm-0"


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _yes(_preview: Preview) -> bool:
    return True


def _settings(tmp_path: Path, drill: Cluster, url: str, **audit: Any) -> Settings:
    return Settings.model_validate({
        "redis": {"url": url},
        "audit": {"path": str(tmp_path / "audit.jsonl"), "kube_events": False, **audit},
        "kubernetes": {"kubeconfig": str(drill.kubeconfig), "namespace": NS},
    })  # fmt: skip


async def _set_level(settings: Settings, level: str) -> Any:
    async with Remediator.from_settings(settings) as remediator:
        plan = await remediator.plan("set-degradation-level", {"level": level})
        return await remediator.run(plan, _yes)


def _two_person_settings(
    drill: Cluster, redis_url: str, log: Path, context: str | None = None
) -> Settings:
    """rebuild-pod under the two-person rule, audited to `log`, acting with the kubeconfig's
    `context` (None: its current one, the operator's)."""
    kube: dict[str, Any] = {"kubeconfig": str(drill.kubeconfig), "namespace": NS}
    if context:
        kube["context"] = context
    return Settings.model_validate({
        "kubernetes": kube, "redis": {"url": redis_url},
        "audit": {"path": str(log), "kube_events": False},
        "guards": {"two_person": ["rebuild-pod"]},
    })  # fmt: skip


@asynccontextmanager
async def requester_and_peer(
    drill: Cluster, redis_url: str, tmp_path: Path
) -> AsyncIterator[tuple[Remediator, Remediator]]:
    """The requester (identified: its person known) on the operator's Kubernetes identity,
    and the peer who approves on another (PEER_CONTEXT); each audits to its own log in
    tmp_path, `requester.jsonl` and `peer.jsonl`."""
    async with (
        Remediator.from_settings(
            _two_person_settings(drill, redis_url, tmp_path / "requester.jsonl")
        ) as requester,
        Remediator.from_settings(
            _two_person_settings(drill, redis_url, tmp_path / "peer.jsonl", PEER_CONTEXT)
        ) as peer,
    ):
        await requester.identify()
        yield requester, peer


# --- item 1: one person approves their own action -------------------------------------------


def _rule(client: RedisClient, prefix: str, grants: RedisClient | None = None) -> TwoPersonRule:
    approvers: dict[str, Any] = {} if grants is None else {"grant_writer": RedisWriter(grants)}
    return TwoPersonRule(
        client, RedisWriter(client), actions=frozenset({"rebuild-pod"}), timeout_s=60,
        prefix=prefix, **approvers,
    )  # fmt: skip


async def test_the_requesters_credentials_cannot_write_an_approval(server: Server) -> None:
    """Item 1: with the operator's ACL user, `HSET … approved_by` (what approved before) no
    longer approves, and the approval key is NOPERM; the approver's user may write approvals
    but not change a request; an approval through oncall as the operator is refused."""
    srv, secrets = server
    prefix = "oncall:approval"  # the shipped ACL's keys; ids of this test's own
    r1, r2 = (f"{n}-{os.urandom(3).hex()}" for n in ("r1", "r2"))
    operator = RedisClient(url_of(srv, "oncall-operator", secrets["oncall-operator"]), timeout=2)
    approver = RedisClient(url_of(srv, "oncall-approver", secrets["oncall-approver"]), timeout=2)
    rule = _rule(operator, prefix)
    try:
        await rule.request(r1, "rebuild-pod", POD, "alice@host1", preview="p", confirm_word="x")
        as_operator = connect(srv, "oncall-operator", secrets["oncall-operator"])
        as_approver = connect(srv, "oncall-approver", secrets["oncall-approver"])
        # The forgery of before: the requester writes "approved by bob" into the request.
        as_operator.hset(rule.key(r1), "approved_by", "bob@host2")
        assert not (await rule.wait(r1, timeout_s=0.5)).ok
        await rule.request(r2, "rebuild-pod", POD, "alice@host1", preview="p", confirm_word="x")
        with pytest.raises(redis.exceptions.NoPermissionError):
            as_operator.set(rule.grant_key(r2), json.dumps({"approved_by": "bob@host2"}))
        with pytest.raises(redis.exceptions.NoPermissionError):
            as_approver.hset(rule.key(r2), "preview", "harmless")
        refused = await rule.approve(r2, "bob@host2")  # oncall with the operator's user
        assert not refused.ok and "may not write approvals" in refused.reason, refused
        approved = await _rule(operator, prefix, grants=approver).approve(r2, "bob@host2")
        assert approved.ok, approved
        waited = await rule.wait(r2, timeout_s=5)
        assert waited.ok and waited.detail["approver"] == "bob@host2"
        as_operator.close()
        as_approver.close()
    finally:
        await operator.aclose()
        await approver.aclose()


async def test_the_approver_is_shown_the_live_target_not_what_the_requester_stored(
    drill: Cluster, redis_url: str, tmp_path: Path
) -> None:
    """Item 1: a request that names one pod in its parameters and shows another (a healthy-
    looking preview of a harmful action) is refused; the stored preview is never shown."""
    first, second = (pod.metadata.name for pod in drill.ready_pods(2))

    shown: list[str] = []

    async def typed(preview: str, _word: str) -> bool:
        shown.append(preview)
        return True

    async with requester_and_peer(drill, redis_url, tmp_path) as (requester, peer):
        harmless = await requester.plan("rebuild-pod", {"pod": first})
        harmful = await requester.plan("rebuild-pod", {"pod": second})
        rule = requester.guards.two_person
        await rule.request("lie-1", "rebuild-pod", harmless.target.label, requester.person,
                           preview="nothing to see: a harmless restart", confirm_word=first,
                           target_json=json.dumps(harmless.target.as_dict()),
                           params_json=json.dumps(harmful.params))  # fmt: skip
        verdict = await peer.approve("lie-1", typed)
    assert not verdict.ok
    assert "the live target is not the one requested" in verdict.reason
    assert shown == []  # nothing confirmed on; the stored text was never shown


# --- item 2: the team anchor is opt-out -----------------------------------------------------


async def test_without_the_stream_a_change_does_not_run(
    server: Server, drill: Cluster, tmp_path: Path
) -> None:
    """Item 2: `audit.redis_stream=` refuses the change (preview: anchor), nothing changes;
    `audit.local_only: true` runs it and every proposed record says LOCAL ONLY."""
    srv, secrets = server
    url = url_of(srv, "oncall-operator", secrets["oncall-operator"])
    admin = connect(srv, "oncall-admin", secrets["oncall-admin"])
    admin.set(LEVEL, "0")
    outcome = await _set_level(_settings(tmp_path, drill, url, redis_stream=None), "2")
    assert outcome.status == "refused" and "anchor" in outcome.message, outcome
    assert admin.get(LEVEL) == b"0"
    local = tmp_path / "local"
    local.mkdir()
    done = await _set_level(_settings(local, drill, url, redis_stream=None, local_only=True), "2")
    assert done.status in ("verified", "unverified"), done  # ran (no Prometheus to verify by)
    assert admin.get(LEVEL) == b"2"
    proposed = next(r for r in _records(local / "audit.jsonl") if r["transition"] == "proposed")
    assert proposed["detail"]["anchor"].startswith("LOCAL ONLY (audit.local_only: true)")
    admin.close()


async def test_a_started_record_the_stream_refuses_stops_the_change(
    server: Server, drill: Cluster, tmp_path: Path
) -> None:
    """Item 2: a Redis user that may not XADD to the configured Stream (NOPERM): the started
    record's copy fails, so nothing runs; the log ends the action (no false INCOMPLETE)."""
    srv, secrets = server
    url = url_of(srv, "oncall-operator", secrets["oncall-operator"])
    admin = connect(srv, "oncall-admin", secrets["oncall-admin"])
    admin.set(LEVEL, "0")
    settings = _settings(tmp_path, drill, url, redis_stream="oncall:not-the-audit-stream")
    outcome = await _set_level(settings, "3")
    assert outcome.status == "refused" and "team Stream" in outcome.message, outcome
    assert "NOPERM" in outcome.message
    assert admin.get(LEVEL) == b"0"
    records = _records(tmp_path / "audit.jsonl")
    assert [r["transition"] for r in records][-2:] == ["started", "failed"]
    assert records[-1]["guard"] == "anchor"
    result = run_oncall("audit", "verify", "--set", f"audit.path={tmp_path / 'audit.jsonl'}",
                        "--set", "audit.redis_stream=")  # fmt: skip
    assert "INCOMPLETE:" not in result.stdout
    admin.close()


def test_verify_without_the_stream_never_says_ok(tmp_path: Path) -> None:
    """Item 2: a log that checks out by itself is "LOCAL CHAIN INTACT", exit 3, never OK."""
    from oncall.audit.log import AuditLog

    log = tmp_path / "audit.jsonl"
    AuditLog(log).append(action_id="a", transition="proposed", action="rebuild-pod",
                         target={"kind": "Pod", "name": "vllm-0"})  # fmt: skip
    result = run_oncall("audit", "verify", "--set", f"audit.path={log}",
                        "--set", "audit.redis_stream=")  # fmt: skip
    assert result.code == 3, result.stdout
    assert "OK" not in result.stdout
    assert result.stdout.startswith("LOCAL CHAIN INTACT: 1 record; not anchored")


# --- item 5: approvals do not reach the Stream ----------------------------------------------


async def test_approvals_and_refusals_reach_the_stream_and_verify(
    drill: Cluster, redis_url: str, tmp_path: Path
) -> None:
    """Item 5: the approver's records (an approval, and a refusal of an unknown id) are in
    the team Stream: the approver's `audit verify` is OK, not "written by hand"; the unknown
    id is audited (it exited 2 with nothing recorded)."""
    pod = drill.ready_pods(2)[0].metadata.name

    async def typed(_preview: str, _word: str) -> bool:
        return True

    async with requester_and_peer(drill, redis_url, tmp_path) as (requester, peer):
        plan = await requester.plan("rebuild-pod", {"pod": pod})
        rule = requester.guards.two_person
        await rule.request("ok-1", plan.action, plan.target.label, requester.person,
                           preview="p", confirm_word=pod,
                           target_json=json.dumps(plan.target.as_dict()),
                           params_json=json.dumps(plan.params))  # fmt: skip
        approved = await peer.approve("ok-1", typed)
        unknown = await peer.approve("no-such-request", typed)
    assert approved.ok, approved
    assert not unknown.ok and "no pending approval request" in unknown.reason
    records = _records(tmp_path / "peer.jsonl")
    assert [r["transition"] for r in records] == ["approved", "refused"]
    assert records[1]["action"] == "approval-of-unknown"
    verify = run_oncall("audit", "verify", "--set", f"audit.path={tmp_path / 'peer.jsonl'}",
                        "--set", f"redis.url={redis_url}")  # fmt: skip
    assert verify.code == 0, verify.stdout + verify.stderr
    assert verify.stdout.startswith("OK: 2 records, chain intact")


# --- item 6: Ctrl-C between the change and its verification --------------------------------


@pytest.mark.parametrize("where", ["breaker reset", "succeeded record"])
async def test_ctrl_c_after_the_change_is_recorded_before_the_interrupt(where: str) -> None:
    """Item 6: the interrupt (asyncio.run cancels the main task on Ctrl-C) lands after the
    change was made, before its verification: while the breaker is reset (Redis), or while
    the `succeeded` record is being written. The log still ends with `succeeded` and an
    interrupted `verified` (it ended at `started`, or without `verified`)."""
    import asyncio

    from oncall.remediation import registry
    from tests.remediation.fakes import make_world
    from tests.remediation.note_action import NoteStore, SetNote

    note = SetNote(NoteStore({"main": "all quiet"}))
    unregister = registry.register(note)
    audit: dict[str, Any] = {"redis_stream": None, "kube_events": False}
    if "local_only" in AuditSettings.model_fields:  # (so that it runs before the fix too)
        audit["local_only"] = True
    world = make_world(Settings.model_validate({"audit": audit}))
    task: asyncio.Task[Any] | None = None

    async def interrupted_reset() -> None:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        await asyncio.sleep(0)

    real_append = world.log.append

    def interrupted_append(**fields: Any) -> dict[str, Any]:
        if fields["transition"] == "succeeded":
            # Queued before this append's own completion: the cancel lands while it is awaited.
            loop.call_soon_threadsafe(task.cancel)  # type: ignore[union-attr]
        return real_append(**fields)

    if where == "breaker reset":
        world.breaker.record_success = interrupted_reset  # type: ignore[method-assign]
    else:
        world.log.append = interrupted_append  # type: ignore[method-assign]

    async def remediate() -> None:
        plan = await world.remediator.plan("set-note", {"text": "rollout paused"})
        await world.remediator.run(plan, _yes)

    loop = asyncio.get_running_loop()
    try:
        task = asyncio.ensure_future(remediate())
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        unregister()
    assert note.store.writes == [("main", "rollout paused")]  # the change was made
    transitions = world.log.transitions()
    assert transitions[-3:] == ["started", "succeeded", "verified"], transitions
    assert world.log.lines[-1]["outcome"]["interrupted"] is True


# --- item 9: smaller --------------------------------------------------------------------------


async def test_a_copy_forged_into_the_stream_does_not_break_anothers_log(
    redis_url: str, tmp_path: Path
) -> None:
    """Item 9: a second copy of another person's record, XADDed with the operators' rights,
    is a NOTE on that person's verify, not a break (it failed with exit 1); an edit of one's
    own log still is."""
    from oncall.audit.log import AuditLog
    from oncall.remediation.audit_mirror import mirror_to_stream

    log = AuditLog(tmp_path / "victim.jsonl")
    client = RedisClient(redis_url, timeout=2)
    try:
        for n in range(2):
            record = log.append(action_id=f"a{n}", transition="proposed", action="rebuild-pod",
                                target={"kind": "Pod", "name": f"vllm-{n}"})  # fmt: skip
            await mirror_to_stream(RedisWriter(client), "oncall:audit", record)
        forged = {**record, "hash": "f" * 64, "outcome": "deleted the database"}
        await mirror_to_stream(RedisWriter(client), "oncall:audit", forged)
    finally:
        await client.aclose()
    args = ("audit", "verify", "--set", f"audit.path={log.path}", "--set", f"redis.url={redis_url}")
    result = run_oncall(*args)
    assert result.code == 0, result.stdout
    assert "NOTE: record 2 of log" in result.stdout and "1 other copy" in result.stdout
    log.path.write_bytes(log.path.read_bytes().replace(b"vllm-0", b"vllm-9"))
    assert run_oncall(*args).code == 1


def test_a_30_day_silence_of_every_alert_is_typed_for() -> None:
    """Item 9: `{alertname=~".+"}` for 30d took only "yes"; now dangerous, typed, with why."""
    from oncall.remediation.actions.silence import silence_matchers, why_dangerous

    broad = silence_matchers('{alertname=~".+"}')
    assert len(why_dangerous(broad, 30 * 86400, 0)) == 2
    assert why_dangerous(silence_matchers('{alertname="X", pod="vllm-0"}'), 7200, 1) == []
    assert why_dangerous(silence_matchers('{alertname="X"}'), 7200, 12)  # matches many


@pytest.mark.parametrize("kind", ["settings", "runbook", "audit"])
def test_a_fifo_is_refused_not_waited_on(tmp_path: Path, kind: str) -> None:
    """Item 9: a FIFO as settings file, runbook or audit log hung the command (no writer)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = {
        "settings": ("--config", str(fifo), "config", "show"),
        "runbook": ("runbook", "lint", str(fifo)),
        "audit": ("audit", "verify", "--set", f"audit.path={fifo}", "--set", "audit.redis_stream="),
    }[kind]
    result = run_oncall(*args, timeout=20)
    assert result.code in (1, 2), result
    assert "FIFO" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_the_audit_log_does_not_follow_a_symlink_into_a_foreign_file(tmp_path: Path) -> None:
    """Item 9: audit.path a symbolic link to another file: records were appended to it."""
    from oncall.audit.log import AuditLog
    from oncall.audit.records import AuditError

    foreign = tmp_path / "someone-elses.conf"
    foreign.write_text("keep me\n")
    link = tmp_path / "audit.jsonl"
    link.symlink_to(foreign)
    with pytest.raises(AuditError, match="symbolic link"):
        AuditLog(link).append(action_id="a", transition="proposed", action="rebuild-pod",
                              target={"kind": "Pod", "name": "vllm-0"})  # fmt: skip
    assert foreign.read_text() == "keep me\n"


def test_a_redis_url_user_name_is_not_masked(tmp_path: Path) -> None:
    """Item 9: `redis://oncall-operator@host` masked the user everywhere, Lease holders too
    (`********@vm`); the user name is shown, a password still masked."""
    from oncall.redaction import forget_secrets, redact, register_url

    url = "redis://oncall-operator@127.0.0.1:6379/0"
    try:
        register_url(url)  # as the settings loader does with every URL it loads
        assert redact("held by oncall-operator@vm/4242") == "held by oncall-operator@vm/4242"
        assert redact(url) == url
        assert redact("redis://u:pw-secret-1@h/0") == "redis://u:********@h/0"
    finally:
        forget_secrets()
    result = run_oncall("config", "show", "--set", f"redis.url={url}")
    assert "oncall-operator@127.0.0.1" in result.stdout, result.stdout


def test_audit_show_with_a_superscript_digit_is_a_usage_error(tmp_path: Path) -> None:
    """Item 9: `audit show ³` exited 70 (int('³'))."""
    result = run_oncall("audit", "show", "³", "--set", f"audit.path={tmp_path / 'a.jsonl'}")
    assert result.code == 2, result
    assert "no audit record with id or seq '³'" in result.stderr


def test_an_empty_two_person_list_is_on_record(tmp_path: Path) -> None:
    """Item 9: `--set guards.two_person=[]` switched the rule off with no record saying so."""
    from oncall.remediation import registry
    from tests.remediation.fakes import make_world
    from tests.remediation.note_action import NoteStore, SetNote

    unregister = registry.register(SetNote(NoteStore({"main": "all quiet"})))
    audit: dict[str, Any] = {"redis_stream": None, "kube_events": False}
    if "local_only" in AuditSettings.model_fields:  # (so that it runs before the fix too)
        audit["local_only"] = True
    settings = Settings.model_validate({"audit": audit, "guards": {"two_person": []}})
    world = make_world(settings)

    async def run() -> None:
        plan = await world.remediator.plan("set-note", {"text": "quiet"})
        await world.remediator.run(plan, _yes)

    import asyncio

    try:
        asyncio.run(run())
    finally:
        unregister()
    proposed = next(r for r in world.log.lines if r["transition"] == "proposed")
    assert proposed["detail"]["two_person"] == {"required": False, "actions": []}
