"""Each remediation end to end against the drill: typed on a terminal, audited at every
transition, mirrored to the Redis Stream and as Kubernetes Events, the effect seen in the
service — and undone where it can be."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
import redis

from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import (
    NS,
    drill_settings,
    kube_call,
    ready_pod,
    records,
    remediate,
    transitions,
    vllm_pods,
)

#: Each test starts on a drill whose replicas are not saturated.
pytestmark = pytest.mark.usefixtures("light")


DONE = ["proposed", "approved", "started", "succeeded", "verified"]


def redis_of(drill: Drill) -> redis.Redis:
    return redis.Redis.from_url(drill.state["urls"]["redis"], decode_responses=True)


def stream_action_ids(drill: Drill) -> set[str]:
    with redis_of(drill) as client:
        entries = client.xrange("oncall:audit", count=100_000)
    return {fields["action_id"] for _, fields in entries}


def test_rebuild_pod(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    name, uid = ready_pod(drill)
    run = remediate(drill, audit, "rebuild-pod", name, answers=[("to confirm", name)])
    assert run.code == 0, run.output
    found = re.search(r"verified: replacement (\S+) \(UID (\S+)\) is Ready", run.output)
    assert found, run.output
    _, new_uid = found.groups()
    assert new_uid != uid
    pods = {p["metadata"]["uid"]: p for p in vllm_pods(drill)}
    assert uid not in pods and new_uid in pods  # the old pod is gone, its replacement serves
    assert transitions(audit) == DONE
    action_id = records(audit)[0]["action_id"]
    assert action_id in stream_action_ids(drill)
    events = kube_call(drill, lambda k: k.list_events(NS))
    ours = [e for e in events if e.get("reason", "").startswith("Oncall")
            and (e.get("involvedObject") or {}).get("name") == name]  # fmt: skip
    assert {e["reason"] for e in ours} >= {"OncallProposed", "OncallStarted", "OncallVerified"}


def test_degradation_level_then_rollback(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    key = drill_settings(drill).degradation.redis_key
    run = remediate(drill, audit, "set-degradation-level", "1", answers=[("to confirm", "yes")])
    assert run.code == 0, run.output
    assert "the gateway reports level 1" in run.output
    with redis_of(drill) as client:
        assert client.get(key) == "1"
    action_id = re.search(r"rollback (\w+)", run.output)
    assert action_id, run.output
    back = remediate(drill, audit, "rollback", action_id.group(1), answers=[("to confirm", "yes")])
    assert back.code == 0, back.output
    assert "the gateway reports level 0" in back.output
    assert transitions(audit) == [*DONE, *DONE, "rolled_back"]
    assert records(audit)[-1]["action_id"] == action_id.group(1)
    with redis_of(drill) as client:
        assert client.get(key) == "0"


def pod_caps(drill: Drill) -> list[int]:
    targets = json.loads((drill.directory / "targets" / "vllm.json").read_text())
    caps = []
    for group in targets:
        for target in group["targets"]:
            url = f"http://{target}/drill/state"
            with urllib.request.urlopen(url, timeout=2) as response:
                caps.append(int(json.load(response)["max_num_seqs"]))
    return caps


def test_max_num_seqs_then_rollback(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    before = pod_caps(drill)
    assert before and set(before) == {256}
    run = remediate(
        drill, audit, "set-max-num-seqs", "vllm", "64", answers=[("to confirm", "vllm")]
    )
    assert run.code == 0, run.output
    assert "rollout complete; 2 pod(s) run --max-num-seqs 64" in run.output
    assert set(pod_caps(drill)) == {64}  # the simulated vLLM processes really run with it
    action_id = re.search(r"rollback (\w+)", run.output)
    assert action_id, run.output
    back = remediate(drill, audit, "rollback", action_id.group(1), answers=[("to confirm", "vllm")])
    assert back.code == 0, back.output
    assert set(pod_caps(drill)) == {256}
    assert transitions(audit) == [*DONE, *DONE, "rolled_back"]


def test_rate_limit_holds_after_a_restart(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    key = drill_settings(drill).degradation.redis_key
    limit = ["guards.rate_limit_actions=1", "guards.rate_limit_window=10m"]
    with redis_of(drill) as client:
        client.delete(f"oncall:guard:rate:rediskey-{key}")
    first = remediate(drill, audit, "set-degradation-level", "1", sets=limit,
                      answers=[("to confirm", "yes")])  # fmt: skip
    assert first.code == 0, first.output
    # A new process — the app restarted, or another operator — sees the same count in Redis.
    second = remediate(drill, audit, "set-degradation-level", "0", sets=limit,
                       answers=[("to confirm", "yes")])  # fmt: skip
    assert second.code == 1
    assert "refused (rate-limit): rate limit: 1 actions on" in second.output, second.output
    assert records(audit)[-1]["transition"] == "refused"
    assert records(audit)[-1]["guard"] == "rate-limit"
    with redis_of(drill) as client:
        assert client.get(key) == "1"  # nothing changed
        client.set(key, "0")
        client.delete(f"oncall:guard:rate:rediskey-{key}")
