"""Issue 32, acceptance 2, against the drill: `kv-cache-pressure` → an incident; its at-firing
verdict (the drill's `oncall serve`); `set-max-num-seqs` applied and verified; `drill clear`.
`oncall incident export -o markdown` then holds, in order, the pending and firing transitions,
the at-firing verdict, the action with its verification and the resolution; each action line
carries its audit record id, and `oncall audit verify` agrees with the draft's chain.

The incident is the grouping's: the drill's `oncall serve` folds its at-firing verdicts into the
team's store, and an `oncall alerts` refresh (which sees every instance) resolves the members
and, with `incidents.close_after=1s`, closes it once none fires.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

from oncall.service.verdicts import VerdictReader
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import as_asked, drill_settings, remediate
from tests.harness.waiting import wait_until

ALERT = "LLMHighP99Latency"
#: An `oncall alerts` refresh with this closes an incident a second after its last member
#: resolved (the default waits 15 minutes).
CLOSE_AT_ONCE = "incidents.close_after=1s"


def alerts(drill: Drill) -> list[dict[str, Any]]:
    """Prometheus' pending and firing alerts."""
    url = f"{drill.prometheus}/api/v1/alerts"
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
        found: list[dict[str, Any]] = json.load(response)["data"]["alerts"]
    return found


def firing(drill: Drill) -> list[dict[str, Any]]:
    return [a for a in alerts(drill) if a["state"] == "firing"]


def incidents(drill: Drill, *options: str) -> list[dict[str, Any]]:
    """`oncall incident list -o json`, after an `oncall alerts` refresh (with `options`)."""
    config = ["--config", str(drill.directory / "oncall.yaml")]
    refreshed = run_oncall(*config, *options, "alerts", "-o", "json", timeout=60)
    assert refreshed.code in (0, 1, 3), refreshed.stderr
    listed = run_oncall(*config, "incident", "list", "-o", "json", timeout=60)
    assert listed.code == 0, listed.stderr
    found: list[dict[str, Any]] = json.loads(listed.stdout)["incidents"]
    return found


def incident_of(drill: Drill, since: float) -> dict[str, Any] | None:
    """The open incident that holds the firing of ALERT since `since`."""
    for incident in incidents(drill):
        if incident["closed_at"] is None and any(
            m["alert"] == ALERT and m["first_firing"] >= since - 1 for m in incident["members"]
        ):
            return incident
    return None


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
    # An earlier test's firing of ALERT still held by Alertmanager would get no new
    # notification, so no verdict at firing: start from none.
    wait_until(
        lambda: not any(a["labels"]["alertname"] == ALERT for a in alerts(drill)),
        within=180,
        what=f"no {ALERT} left by an earlier test",
    )

    # An earlier test's incident still open would take this firing in (membership is sticky
    # while it lasts): close what has resolved, and start from no open incident holding it.
    def none_open() -> bool:
        listed = incidents(drill, "--set", CLOSE_AT_ONCE)
        return not [i for i in listed if i["closed_at"] is None
                    and any(m["alert"] == ALERT for m in i["members"])]  # fmt: skip

    wait_until(none_open, within=60, what=f"no open incident holding {ALERT}")
    injected = time.time()
    drill.cli("inject", "kv-cache-pressure")
    action_id = None
    try:
        wait_until(
            lambda: any(a["labels"]["alertname"] == ALERT for a in firing(drill)),
            within=120,
            what=f"{ALERT} firing",
        )
        wait_until(lambda: verdict_since(drill, injected), within=120, what="its verdict")
        grouped = wait_until(
            lambda: incident_of(drill, injected),
            within=60,
            what=f"the incident grouping it (injected at {injected:.0f})",
            seen=lambda: [
                (i["id"], i["closed_at"], [(m["alert"], m["first_firing"]) for m in i["members"]])
                for i in incidents(drill)
            ],
        )
        incident_id = grouped["id"]
        members = {m["alert"] for m in grouped["members"]}
        run = remediate(drill, audit, "set-max-num-seqs", "vllm", "64",
                        answers=[("to confirm", as_asked("vllm"))])  # fmt: skip
        assert run.code == 0, run.output
        found = re.search(r"rollback (\w+)", run.output)
        assert found, run.output
        action_id = found.group(1)
    finally:
        drill.cli("clear")
    try:
        wait_until(
            lambda: not members & {a["labels"]["alertname"] for a in firing(drill)},
            within=180,
            what=f"{sorted(members)} resolved",
        )

        def closed() -> bool:
            listed = incidents(drill, "--set", CLOSE_AT_ONCE)
            return any(i["id"] == incident_id and i["closed_at"] for i in listed)

        wait_until(closed, within=60, what=f"{incident_id} closed")
        export = run_oncall(*options, "incident", "export", incident_id, "-o", "markdown",
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
