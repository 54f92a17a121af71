"""Issue 32, acceptance 2, against the drill: `kv-cache-pressure` → an incident; its at-firing
verdict (the drill's `oncall serve`); `set-max-num-seqs` applied and verified; `drill clear`.
`oncall incident export -o markdown` then holds, in order, the pending and firing transitions,
the at-firing verdict, the action with its verification and the resolution; each action line
carries its audit record id, and `oncall audit verify` agrees with the draft's chain.

The incident is made by `record_incident` from Prometheus' firing alerts, standing in for the
grouping (`oncall.incidents.grouping`), which writes the same store.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from oncall.backends import from_settings
from oncall.backends.incidents import IncidentStore
from oncall.model.incidents import Incident, Member, incident_id
from oncall.service.verdicts import VerdictReader
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import as_asked, drill_settings, remediate
from tests.harness.processes import wait_until

ALERT = "LLMHighP99Latency"


def firing(drill: Drill) -> list[dict[str, Any]]:
    url = f"{drill.prometheus}/api/v1/alerts"
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
        alerts: list[dict[str, Any]] = json.load(response)["data"]["alerts"]
    return [a for a in alerts if a["state"] == "firing"]


def record_incident(drill: Drill, since: float, *, closing: Incident | None = None) -> Incident:
    """The incident of the alerts firing since `since`, written to the team's store; with
    `closing`, that incident closed now, every member resolved (what the grouping does)."""
    now = time.time()
    members: list[Member] = []
    if closing is not None:
        members = [replace(m, resolved_at=now) for m in closing.members]
    for alert in firing(drill) if closing is None else []:
        active = datetime.fromisoformat(alert["activeAt"].replace("Z", "+00:00")).timestamp()
        if active >= since - 1:
            labels = {k: v for k, v in alert["labels"].items() if k != "alertname"}
            members.append(Member("", alert["labels"]["alertname"], labels, active))
    members.sort(key=lambda m: m.first_firing)
    incident = Incident(incident_id(members[0]), members[0].first_firing, tuple(members),
                        explanation="grouped: the drill's kv-cache-pressure alerts",
                        closed_at=None if closing is None else now)  # fmt: skip

    async def put() -> None:
        store = IncidentStore(from_settings.redis_client(drill_settings(drill).redis))
        try:
            await store.put(incident)
        finally:
            await store.aclose()

    asyncio.run(put())
    return incident


def verdict_since(drill: Drill, since: float) -> bool:
    async def read() -> bool:
        reader = VerdictReader.from_settings(drill_settings(drill))
        try:
            return any(v["ran_at"] >= since for v in await reader.list(alert=ALERT))
        finally:
            await reader.aclose()

    return asyncio.run(read())


def test_the_postmortem_draft_of_a_kv_cache_incident(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    options = ["--config", str(drill.directory / "oncall.yaml"), "--set", f"audit.path={audit}"]
    injected = time.time()
    drill.cli("inject", "kv-cache-pressure")
    action_id = None
    try:
        wait_until(lambda: any(a["labels"]["alertname"] == ALERT for a in firing(drill)),
                   timeout=120, what=f"{ALERT} firing")  # fmt: skip
        wait_until(lambda: verdict_since(drill, injected), timeout=120, what="its verdict")
        incident = record_incident(drill, injected)
        run = remediate(drill, audit, "set-max-num-seqs", "vllm", "64",
                        answers=[("to confirm", as_asked("vllm"))])  # fmt: skip
        assert run.code == 0, run.output
        found = re.search(r"rollback (\w+)", run.output)
        assert found, run.output
        action_id = found.group(1)
    finally:
        drill.cli("clear")
    try:
        wait_until(lambda: not any(a["labels"]["alertname"] == ALERT for a in firing(drill)),
                   timeout=120, what=f"{ALERT} resolved")  # fmt: skip
        record_incident(drill, injected, closing=incident)
        export = run_oncall(*options, "incident", "export", incident.id, "-o", "markdown",
                            timeout=60)  # fmt: skip
        verify = run_oncall(*options, "audit", "verify", timeout=60)
    finally:
        if action_id is not None:  # the next drill test finds the Deployment as it was
            back = remediate(
                drill, audit, "rollback", action_id, answers=[("to confirm", as_asked("vllm"))]
            )
            assert back.code == 0, back.output
    text = export.stdout
    (tmp_path / "postmortem.md").write_text(text)  # kept beside the test's log, to read
    assert export.code == 0, (export.stderr, text)
    timeline = text.split("## Timeline")[1].split("## What the checklists")[0]
    order = [
        f"**pending** {ALERT}", f"**firing** {ALERT}", f"checklist at firing of {ALERT}",
        "set-max-num-seqs Deployment ai/vllm: proposed", "set-max-num-seqs Deployment ai/vllm: "
        "verified — verified", f"**resolved** {ALERT}", "**closed** incident closed",
    ]  # fmt: skip
    places = [timeline.find(item) for item in order]
    assert -1 not in places and places == sorted(places), (places, timeline)
    actions = [line for line in timeline.splitlines() if "set-max-num-seqs" in line]
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    # The rollback after the export wrote more (a `rolled_back` of this action among them).
    ours = [r for r in records if r["action_id"] == action_id][:5]
    assert [r["transition"] for r in ours] == [
        "proposed",
        "approved",
        "started",
        "succeeded",
        "verified",
    ]
    for line, record in zip(actions, ours, strict=True):  # each action line: its record id
        assert f"[record {record['id']}, seq {record['seq']}]" in line, line
    assert "**set-max-num-seqs** (action " + action_id + "): verified" in text
    # `oncall audit verify` agrees: intact, with the count the draft states.
    assert verify.code in (0, 3), verify.stdout + verify.stderr
    count = int(re.search(r"(\d+) records?", verify.stdout).group(1))  # type: ignore[union-attr]
    assert count == len(ours)
    chain = text.split("## Audit chain")[1]
    assert (f"- Verified: {count} records, chain intact" in chain
            or f"- Local chain intact ({count} records)" in chain), chain  # fmt: skip
    assert "NOT VOUCHED" not in text
