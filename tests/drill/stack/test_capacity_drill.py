"""The capacity preflight against the drill: under `kv-cache-pressure` with 2 replicas,
rebuilding a pod would send its sequences to a saturated one (refuse: nothing changes without
the override phrase, and the override is audited); with 4 replicas and light load it is ok."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import (
    query,
    ready_pods,
    records,
    remediate,
    transitions,
    vllm_pods,
    wait_light,
)
from tests.harness.waiting import wait_until


def scale(drill: Drill, replicas: int | None) -> None:
    url = f"http://127.0.0.1:{drill.state['ports']['cluster_api']}/drill/scale"
    body = json.dumps({"replicas": replicas}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
        assert response.status == 200


#: The guard's KV threshold in these tests: the drill's saturated caches hover between 0.9 and
#: 1.0 from one scrape to the next; 0.8 keeps a saturated pod saturated in every reading.
KV_THRESHOLD = 0.8


def saturated(drill: Drill, pods: list[str]) -> bool:
    """Every pod's KV cache ≥ KV_THRESHOLD and preempting, as Prometheus has it."""
    kv = query(drill, 'max by (pod) (vllm:kv_cache_usage_perc{namespace="ai"})')
    preempted = query(
        drill, 'sum by (pod) (increase(vllm:num_preemptions_total{namespace="ai"}[120s]))'
    )
    return all(kv.get(p, 0) >= KV_THRESHOLD and preempted.get(p, 0) > 0 for p in pods)


def checklist(drill: Drill) -> dict[str, Any]:
    """`oncall check LLMHighP99Latency -o json`: step statuses and proposal ids."""
    config = str(drill.directory / "oncall.yaml")
    result = run_oncall("--config", config, "check", "LLMHighP99Latency", "-o", "json", timeout=60)
    assert result.code in (0, 1, 3), result.stderr
    report = json.loads(result.stdout)
    return {
        "steps": {s["id"]: s["status"] for s in report["steps"]},
        "proposals": [p["id"] for p in report["proposals"]],
    }


def capacity_of(audit: Path, transition: str = "proposed") -> dict[str, Any]:
    record = next(r for r in records(audit) if r["transition"] == transition)
    found: dict[str, Any] = record["detail"]["capacity"]
    return found


def load_of(drill: Drill, pod: str) -> float:
    """Running + waiting sequences of `pod`, as Prometheus has them."""
    running = query(drill, 'sum by (pod) (vllm:num_requests_running{namespace="ai"})')
    waiting = query(drill, 'sum by (pod) (vllm:num_requests_waiting{namespace="ai"})')
    return running.get(pod, 0) + waiting.get(pod, 0)


@pytest.fixture
def kv_pressure(drill: Drill) -> Iterator[list[str]]:
    """`kv-cache-pressure` on the drill's 2 replicas, both saturated; the pods' names."""
    drill.cli("inject", "kv-cache-pressure")
    try:
        wait_until(lambda: len(ready_pods(drill)) == 2, within=60, what="2 Ready vLLM pods")
        names = [p["metadata"]["name"] for p in ready_pods(drill)]
        wait_until(lambda: saturated(drill, names), within=90, what="both pods' KV saturated")
        yield names
    finally:
        drill.cli("clear")


def test_the_runbook_proposes_no_rebuild_when_the_others_are_saturated(
    drill: Drill, kv_pressure: list[str]
) -> None:
    found: dict[str, Any] = {}

    def judged() -> bool:
        found.update(checklist(drill))
        return bool(found["steps"].get("kv_cache") == "fail")

    wait_until(judged, within=60, what="the checklist finds the KV cache full")
    assert found["steps"]["kv_imbalance"] == "ok", found
    assert "lower-max-num-seqs-kv" in found["proposals"]
    assert "rebuild-busiest-pod" not in found["proposals"], found


@pytest.mark.timeout(300)  # two remediations, the second verified when the replacement is Ready
def test_rebuild_under_kv_pressure_is_refused_unless_overridden(
    drill: Drill, tmp_path: Path, kv_pressure: list[str]
) -> None:
    names = kv_pressure
    pod = ready_pods(drill)[0]
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]

    # The plain word is not enough: declined, nothing evicted.
    audit = tmp_path / "refused.jsonl"
    sets = [f"guards.capacity_kv_threshold={KV_THRESHOLD}"]
    run = remediate(drill, audit, "rebuild-pod", name, answers=[("to confirm", name)], sets=sets)
    assert run.code == 1, run.output
    assert "capacity: refuse: the remaining replicas are saturated" in run.output
    assert f"override capacity {name}" in run.output
    assert transitions(audit) == ["proposed", "declined"]
    shown = capacity_of(audit)
    assert shown["verdict"] == "refuse"
    others = [n for n in names if n != name]
    assert shown["moved_sequences"] > 0 and shown["saturated"] == others
    assert {row["pod"] for row in shown["replicas"]} == set(names)
    assert uid in {p["metadata"]["uid"] for p in vllm_pods(drill)}

    # With the phrase: it runs, and the record says it was overridden, with the numbers.
    audit = tmp_path / "overridden.jsonl"
    word = f"override capacity {name}"
    run = remediate(drill, audit, "rebuild-pod", name, answers=[("to confirm", word)], sets=sets)
    assert transitions(audit)[:3] == ["proposed", "approved", "started"], run.output
    approved = next(r for r in records(audit) if r["transition"] == "approved")
    override = approved["detail"]["capacity_override"]
    assert override["overridden"] is True and override["verdict"] == "refuse"
    assert override["moved_sequences"] > 0 and override["phrase"] == "override capacity"
    started = capacity_of(audit, "started")
    assert started["overridden"] is True, started
    wait_until(
        lambda: uid not in {p["metadata"]["uid"] for p in vllm_pods(drill)},
        within=60,
        what=f"pod {name} evicted",
    )


@pytest.mark.timeout(300)  # 2 more pods to start, the earlier pressure to drain
def test_rebuild_with_four_lightly_loaded_replicas_is_ok(drill: Drill, tmp_path: Path) -> None:
    scale(drill, 4)
    try:
        wait_until(lambda: len(ready_pods(drill)) == 4, within=120, what="4 Ready vLLM pods")

        wait_light(drill)
        name = ready_pods(drill)[0]["metadata"]["name"]
        audit = tmp_path / "ok.jsonl"
        run = remediate(
            drill, audit, "rebuild-pod", name, "--dry-run", sets=["guards.capacity_window=10s"]
        )
        assert "ok      capacity: ok: " in run.output, run.output
        shown = capacity_of(audit)
        assert shown["verdict"] == "ok" and len(shown["others"]) == 3
        assert shown["moved_sequences"] <= shown["free_slots"]
        assert shown["time_to_ready_s"] is not None and shown["grace_period_s"] == 30
    finally:
        scale(drill, None)


@pytest.mark.timeout(300)  # the earlier pressure to drain, then the new one to build
def test_load_growing_after_the_preview_is_refused_before_the_write(
    drill: Drill, tmp_path: Path
) -> None:
    """Previewed on a light load; while the person types, the load grows many times over
    (`kv-cache-pressure`): the re-check just before the eviction refuses, nothing changes."""
    wait_light(drill)
    pod = ready_pods(drill)[0]
    name, uid = str(pod["metadata"]["name"]), str(pod["metadata"]["uid"])
    previewed = load_of(drill, name)

    def pressure_then_confirm(output: str) -> str:
        assert "capacity: ok: " in output, output
        drill.cli("inject", "kv-cache-pressure")
        grown = max(previewed, 1) * 1.5
        wait_until(lambda: load_of(drill, name) > grown + 2, within=60, what="the load grown")
        return name

    audit = tmp_path / "grown.jsonl"
    try:
        run = remediate(
            drill, audit, "rebuild-pod", name, answers=[("to confirm", pressure_then_confirm)],
            sets=["guards.capacity_window=10s"],
        )  # fmt: skip
    finally:
        drill.cli("clear")
    assert run.code == 1, run.output
    assert transitions(audit) == ["proposed", "approved", "refused"], run.output
    refused = records(audit)[-1]
    assert refused["guard"] == "capacity"
    assert refused["outcome"].startswith("re-check before the write: "), refused
    assert refused["detail"]["previewed"] == "ok" and refused["detail"]["verdict"] == "refuse"
    assert uid in {p["metadata"]["uid"] for p in vllm_pods(drill)}
