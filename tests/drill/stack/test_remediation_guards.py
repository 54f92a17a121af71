"""Refusals against the drill: nothing changes, and the refusal is audited with its guard.
Also: two operators on one target, secrets nowhere, and no way around the typed confirmation."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from oncall.remediation.executor import Remediator
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import (
    NS,
    app_settings,
    drill_settings,
    kube_call,
    ready_pod,
    records,
    remediate,
    transitions,
)
from tests.harness.terminal import run_on_terminal

#: Each test starts on a drill whose replicas are not saturated.
pytestmark = pytest.mark.usefixtures("light")


def pod_uid(drill: Drill, name: str) -> str | None:
    """The UID of pod `name` now (None when gone). Tests compare the pod they aimed at, not the
    whole set: an earlier test's rollout may still be replacing other pods."""
    pods = kube_call(drill, lambda k: k.list_pods(NS, label_selector="app=vllm"))
    return next((p["metadata"]["uid"] for p in pods if p["metadata"]["name"] == name), None)


def deployment_args(drill: Drill) -> list[str]:
    deployment = kube_call(drill, lambda k: k.get_deployment(NS, "vllm"))
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def refused_with(audit: Path, guard: str) -> dict[str, Any]:
    last = records(audit)[-1]
    assert last["transition"] == "refused", transitions(audit)
    assert last["guard"] == guard, last
    return last


def test_stale_pod_uid_is_refused(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    name, uid = ready_pod(drill)
    run = remediate(drill, audit, "rebuild-pod", name, "--uid", "0000-stale",
                    answers=[("to confirm", name)])  # fmt: skip
    assert run.code == 1
    assert "the UID in the precondition (0000-stale) does not match" in run.output
    assert pod_uid(drill, name) == uid
    refused_with(audit, "precondition")
    assert transitions(audit) == ["proposed", "refused"]


def test_args_changed_between_preview_and_execute_is_refused(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    original = deployment_args(drill)
    index = original.index("--max-num-seqs") + 1
    path = f"/spec/template/spec/containers/0/args/{index}"

    def someone_else_edits(_output: str) -> str:
        ops = [{"op": "replace", "path": path, "value": "200"}]
        kube_call(drill, lambda k: k.patch_deployment_json(NS, "vllm", ops, dry_run=False))
        return "vllm"  # then the operator confirms what they saw

    try:
        run = remediate(drill, audit, "set-max-num-seqs", "vllm", "64",
                        answers=[("to confirm", someone_else_edits)])  # fmt: skip
        assert run.code == 1, run.output
        assert "the Deployment's args changed since the preview" in run.output
        assert deployment_args(drill)[index] == "200"  # theirs, not ours
        refused_with(audit, "precondition")
        assert transitions(audit) == ["proposed", "approved", "refused"]
    finally:
        ops = [{"op": "replace", "path": path, "value": original[index]}]
        kube_call(drill, lambda k: k.patch_deployment_json(NS, "vllm", ops, dry_run=False))
        kube_call(drill, lambda k: k.wait_rollout(NS, "vllm", timeout=120))


def test_read_only_mode_is_refused(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    name, uid = ready_pod(drill)
    run = remediate(drill, audit, "rebuild-pod", name, "--read-only",
                    answers=[("to confirm", name)])  # fmt: skip
    assert run.code == 1
    assert "refused (read-only)" in run.output
    assert pod_uid(drill, name) == uid
    refused_with(audit, "read-only")


def test_forbidden_by_kubernetes_names_the_missing_permission(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    before = deployment_args(drill)
    run = remediate(drill, audit, "set-max-num-seqs", "vllm", "64",
                    sets=["kubernetes.context=oncall-drill-readonly"],
                    answers=[("to confirm", "vllm")])  # fmt: skip
    assert run.code == 1
    assert 'cannot patch resource "deployments.apps" in namespace "ai"' in run.output
    assert deployment_args(drill) == before
    refused_with(audit, "permission")


def test_a_lease_held_by_another_operator_refuses_and_names_them(
    drill: Drill, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    lease = "oncall-deployment-ai-vllm"
    taken = kube_call(drill, lambda k: k.acquire_lease(NS, lease, "alice@bastion-2", 60))
    assert taken.acquired
    try:
        before = deployment_args(drill)
        run = remediate(drill, audit, "set-max-num-seqs", "vllm", "64")
        assert run.code == 1
        # The preview names her, and nobody is asked to confirm what would be refused.
        assert "alice@bastion-2 is acting on Deployment ai/vllm (since " in run.output
        assert "to confirm" not in run.output
        assert deployment_args(drill) == before
        refused = refused_with(audit, "lease")
        assert refused["detail"]["holder"] == "alice@bastion-2"
    finally:
        kube_call(drill, lambda k: k.release_lease(NS, lease, "alice@bastion-2"))


async def test_two_operators_at_once_exactly_one_acts(drill: Drill, tmp_path: Path) -> None:
    settings = app_settings(drill, tmp_path / "audit.jsonl")
    key = settings.degradation.redis_key
    async with (
        Remediator.from_settings(settings) as alice,
        Remediator.from_settings(settings) as bob,
    ):
        alice.holder, bob.holder = "alice@bastion-1", "bob@bastion-2"

        async def yes(*_args: Any) -> bool:
            return True

        plans = [await r.plan("set-degradation-level", {"level": 1}) for r in (alice, bob)]
        outcomes = await asyncio.gather(alice.run(plans[0], yes), bob.run(plans[1], yes))
    statuses = sorted(o.status for o in outcomes)
    assert statuses == ["refused", "verified"], [o.message for o in outcomes]
    loser = next(o for o in outcomes if o.status == "refused")
    winner = next(o for o in outcomes if o.status == "verified")
    holder = "alice@bastion-1" if winner is outcomes[0] else "bob@bastion-2"
    assert f"{holder} is acting on" in loser.message
    with redis.Redis.from_url(drill.state["urls"]["redis"], decode_responses=True) as client:
        client.set(key, "0")


def test_no_secret_reaches_the_log_the_stream_the_events_or_any_output(
    drill: Drill, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    redis_url = drill.state["urls"]["redis"]
    redis_password = "redis-pw-7f3a9c1e"
    prom_token = "prom-token-51b2d8e4"
    vllm_key = "vllm-key-c09e44aa"
    kubeconfig = yaml.safe_load((drill.directory / "kubeconfig").read_text())
    kube_token = kubeconfig["users"][0]["user"]["token"]
    with redis.Redis.from_url(redis_url) as client:  # a user of our own: the drill keeps its own
        client.acl_setuser("oncall-test", enabled=True, passwords=[f"+{redis_password}"],
                           keys=["*"], channels=["*"], commands=["+@all"])  # fmt: skip
    host_port = redis_url.removeprefix("redis://")
    sets = [f"redis.url=redis://oncall-test@{host_port}", f"redis.password={redis_password}",
            f"prometheus.bearer_token={prom_token}", f"vllm.api_key={vllm_key}"]  # fmt: skip
    name, _ = ready_pod(drill)
    try:
        run = remediate(drill, audit, "rebuild-pod", name, sets=sets,
                        answers=[("to confirm", name)])  # fmt: skip
        assert run.code == 0, run.output
        config = ["--config", str(drill.directory / "oncall.yaml"), "--set", f"audit.path={audit}"]
        for item in sets:
            config += ["--set", item]
        outputs = [run.output]
        for args in (["audit", "list"], ["audit", "list", "-o", "json"], ["audit", "verify"],
                     ["audit", "export", "-o", "csv"], ["audit", "export", "-o", "jsonl"],
                     ["audit", "show", "1"], ["config", "show"]):  # fmt: skip
            result = run_oncall(*config, *args)
            outputs += [result.stdout, result.stderr]
        with redis.Redis.from_url(redis_url, decode_responses=True) as client:
            stream = json.dumps(client.xrange("oncall:audit", count=100_000))
        events = json.dumps(kube_call(drill, lambda k: k.list_events(NS)))
        places = {"audit log": audit.read_text(), "stream": stream, "events": events,
                  **{f"output {i}": text for i, text in enumerate(outputs)}}  # fmt: skip
        assert any(r["transition"] == "verified" for r in records(audit))
        for secret in (redis_password, prom_token, vllm_key, kube_token):
            leaks = [where for where, text in places.items() if secret in text]
            assert not leaks, f"a secret appears in {leaks}"
    finally:
        with redis.Redis.from_url(redis_url) as client:
            client.acl_deluser("oncall-test")


@pytest.mark.parametrize(
    "how",
    ["piped answer", "closed stdin", "env YES", "flag --yes", "flag -y", "set confirm=false"],
)
def test_nothing_skips_the_typed_confirmation(drill: Drill, tmp_path: Path, how: str) -> None:
    audit = tmp_path / "audit.jsonl"
    name, uid = ready_pod(drill)
    base = ["--config", str(drill.directory / "oncall.yaml"), "--set", f"audit.path={audit}"]
    argv = [sys.executable, "-m", "oncall", *base, "remediate", "rebuild-pod", name]
    stdin: Any = subprocess.DEVNULL
    text_in: str | None = None
    env = None
    if how == "piped answer":
        stdin, text_in = None, f"{name}\n"
    elif how == "env YES":
        env = {"ONCALL_YES": "1", "ONCALL_CONFIRM": "yes", "YES": "1", "CI": "true"}
    elif how.startswith("flag"):
        argv.append(how.removeprefix("flag "))
    elif how == "set confirm=false":
        argv[argv.index("remediate") : argv.index("remediate")] = ["--set", "confirm=false"]
    result = subprocess.run(
        argv, input=text_in, stdin=stdin if text_in is None else None, capture_output=True,
        text=True, timeout=120, check=False,
        env=None if env is None else {**os.environ, **env},
    )  # fmt: skip
    assert result.returncode in (1, 2), result.stdout + result.stderr
    assert pod_uid(drill, name) == uid
    if result.returncode == 1:  # it got as far as asking: refused for want of a terminal
        assert "a typed confirmation needs a terminal" in result.stdout
        refused_with(audit, "terminal")
    else:  # not even a valid command line
        assert not audit.exists() or "started" not in transitions(audit)


def test_two_person_rule_needs_someone_else(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    key = drill_settings(drill).degradation.redis_key
    rule = ['guards.two_person=["set-degradation-level"]']
    base = ["--config", str(drill.directory / "oncall.yaml"), "--set", f"audit.path={audit}"]
    approvals: list[tuple[int, str]] = []

    def action_id_of(output: str) -> str:
        return output.split("oncall remediate approve ", 1)[1].split(maxsplit=1)[0]

    def word_of(output: str) -> str:
        # "Type the target's name (WORD) to confirm" or "Type yes to confirm".
        last = output.rsplit("Type ", 1)[1]
        return last.split("(", 1)[1].split(")", 1)[0] if last.startswith("the") else "yes"

    def self_then_peer(output: str) -> str:
        action_id = action_id_of(output)
        # Another $USER on the requester's own credentials: still the requester.
        env = {"USER": "mallory", "LOGNAME": "mallory"}
        own_log = ["--set", f"audit.path={tmp_path / 'mallory.jsonl'}"]
        spoofed = run_oncall(*base, *own_log, "remediate", "approve", action_id, env=env)
        approvals.append((spoofed.code, spoofed.stdout))
        # The peer (another Kubernetes identity), on a terminal, typing the requester's word.
        peer = run_on_terminal(
            [*base, "--set", f"audit.path={tmp_path / 'peer.jsonl'}", "--set",
             "kubernetes.context=oncall-drill-peer", "remediate", "approve", action_id],
            [("to confirm", word_of)], timeout=60,
        )  # fmt: skip
        approvals.append((peer.code, peer.output))
        return ""

    answers: list[tuple[str, str | Callable[[str], str]]] = [
        ("to confirm", word_of),
        ("waiting for a second person", self_then_peer),
    ]
    run = remediate(drill, audit, "set-degradation-level", "1", sets=rule, answers=answers)
    assert approvals[0][0] == 1 and "self-approval is refused" in approvals[0][1], approvals
    assert approvals[1][0] == 0, approvals
    assert run.code == 0, run.output
    assert transitions(audit) == [
        "proposed",
        "approved",
        "approved",
        "started",
        "succeeded",
        "verified",
    ]
    assert "oncall-peer@" in json.dumps(records(audit)[2]["detail"])
    # Audited in both logs: each approver's own says what it did about whose request.
    assert transitions(tmp_path / "mallory.jsonl") == ["refused"]
    [approval] = records(tmp_path / "peer.jsonl")
    assert approval["transition"] == "approved"
    assert approval["actor"]["kube_user"] == "oncall-peer"
    assert approval["detail"]["approval_of"].startswith("oncall-operator@")
    with redis.Redis.from_url(drill.state["urls"]["redis"], decode_responses=True) as client:
        client.set(key, "0")
