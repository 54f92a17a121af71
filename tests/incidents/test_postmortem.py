"""The postmortem draft from fixed inputs: its structure against a golden file (times and ids
masked), and each guard: a tampered record, an ongoing incident, Prometheus without history."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from oncall.audit.records import record_hash
from oncall.incidents.assemble import draft_of
from oncall.incidents.postmortem import NOT_VOUCHED, markdown, sparkline, to_json
from tests.incidents.inputs import read_of

GOLDEN = Path(__file__).parent / "golden" / "postmortem.md"


def structure(text: str) -> str:
    """The document with what varies between runs masked: times, record and incident ids."""
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<TIME>", text)
    text = re.sub(r"\b\d{6}-[0-9a-f]{8}\b", "<RECORD>", text)
    return re.sub(r"\binc-[0-9a-f]{10}\b", "<INCIDENT>", text)


def test_the_draft_keeps_its_structure(tmp_path: Path) -> None:
    read, _ = read_of(tmp_path)
    text = structure(markdown(draft_of(read)))
    if os.environ.get("ONCALL_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_the_timeline_is_in_order_and_cites_every_record(tmp_path: Path) -> None:
    read, log = read_of(tmp_path)
    text = markdown(draft_of(read))
    timeline = text.split("## Timeline")[1].split("## What the checklists")[0]
    order = [
        "LLMHighP99Latency{service=chat} pending", "LLMHighP99Latency{service=chat} firing",
        "checklist at firing of LLMHighP99Latency", "set-max-num-seqs Deployment ai/vllm: proposed",
        "verified: 2 pod(s)", "note: lowered", "LLMHighP99Latency{service=chat} resolved",
        "incident closed",
    ]  # fmt: skip
    places = [timeline.index(item) for item in order]
    assert places == sorted(places), timeline
    ours = [r for r in log.records() if r["action"] != "rebuild-pod"]
    for record in ours:  # every line from the log carries its record id
        assert f"[record {record['id']}, seq {record['seq']}]" in timeline
    assert "rebuild-pod" not in text  # another alert's action is not this incident's
    assert "hunter2-pass" not in text and "password ***" in text  # redacted when written
    assert "preview: max_num_seqs 256 → max_num_seqs 64" in timeline
    assert NOT_VOUCHED not in text
    assert "- Verified: 7 records, chain intact" in text


def test_an_edited_record_is_named_at_the_top_and_marked(tmp_path: Path) -> None:
    read, log = read_of(tmp_path)
    lines = log.path.read_text().splitlines()
    edited = json.loads(lines[4])  # the `verified` record: someone claims a different outcome
    edited["outcome"]["detail"] = "2 pod(s) run --max-num-seqs 32"
    lines[4] = json.dumps(edited)
    log.path.write_text("\n".join(lines) + "\n")
    draft = draft_of(read.__class__(**{**read.__dict__, "lines": list(log.lines()),
                                       "report": log.verify()}))  # fmt: skip
    text = markdown(draft)
    top = text.split("## Summary")[0]
    assert "FAILED verification" in top and f"seq 5 ({edited['id']})" in top, top
    marked = [line for line in text.splitlines() if NOT_VOUCHED in line]
    assert any("--max-num-seqs 32" in line for line in marked), marked
    assert all("seq 5" in line for line in marked), marked  # only the edited one
    assert draft.chain.status == "failed"
    assert to_json(draft)["chain"]["unvouched"] == [{"seq": 5, "id": edited["id"]}]


def test_a_record_rewritten_with_a_fresh_hash_is_not_vouched_for(tmp_path: Path) -> None:
    """Its own hash matches; the next record's prev does not: it is the one not vouched for."""
    read, log = read_of(tmp_path)
    lines = log.path.read_text().splitlines()
    edited = json.loads(lines[0])
    edited["detail"]["after"] = {"max_num_seqs": 8}
    edited["hash"] = record_hash(edited)
    lines[0] = json.dumps(edited)
    log.path.write_text("\n".join(lines) + "\n")
    new = read.__class__(**{**read.__dict__, "lines": list(log.lines()), "report": log.verify()})
    draft = draft_of(new)
    assert (1, edited["id"]) in draft.chain.unvouched
    proposed = next(e for e in draft.events if e.seq == 1)
    assert proposed.vouched is False and "max_num_seqs 8" in proposed.text


def test_an_open_incident_says_ongoing(tmp_path: Path) -> None:
    read, _ = read_of(tmp_path, closed=False)
    text = markdown(draft_of(read))
    assert "- Status: ongoing (still open)" in text
    assert "so far" in text and "incident closed" not in text
    assert to_json(draft_of(read))["status"] == "ongoing"


def test_without_alerts_history_the_timeline_says_from_when_it_knows(tmp_path: Path) -> None:
    read, _ = read_of(tmp_path, alerts=False)
    text = markdown(draft_of(read))
    assert "Prometheus holds no ALERTS history of LLMHighP99Latency{service=chat} from" in text
    assert "its transitions below are the incident's record" in text
    assert "LLMHighP99Latency{service=chat} firing" in text  # from the incident's record
    assert "pending" not in text.split("## Timeline")[1].split("## What")[0]


def test_without_an_audit_log_nothing_is_vouched_for(tmp_path: Path) -> None:
    read, _ = read_of(tmp_path)
    new = read.__class__(**{**read.__dict__, "report": None, "audit_problem": "unreadable"})
    text = markdown(draft_of(new))
    assert "could not be verified** (unreadable)" in text
    assert text.count(NOT_VOUCHED) >= 6


def test_sparkline_draws_the_shape() -> None:
    assert sparkline([0.0, 1.0, 2.0, 3.0]) == "▁▃▆█"
    assert sparkline([]) == "" and sparkline([float("nan")]) == ""
    assert len(sparkline([float(i) for i in range(100)], width=40)) == 40


def test_an_empty_audit_log_is_intact_and_cites_nothing(tmp_path: Path) -> None:
    from oncall.audit.log import AuditLog

    read, _ = read_of(tmp_path)
    empty = AuditLog(tmp_path / "none.jsonl")
    new = read.__class__(**{**read.__dict__, "lines": [], "report": empty.verify()})
    text = markdown(draft_of(new))
    assert "- Verified: 0 records, chain intact" in text and "[record" not in text
