"""Fixed inputs of an incident's draft: an incident of two alerts, their ALERTS series, one
at-firing verdict and a real audit log with a verified action and a note (times relative to
the log's records, which are written now)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from oncall.audit.log import AuditLog
from oncall.audit.records import NOTE_ACTION
from oncall.incidents.assemble import Read
from oncall.incidents.postmortem import Signal
from oncall.model.incidents import Cause, Incident, Member, incident_id
from oncall.model.metrics import Series

DEPLOY = {"kind": "Deployment", "namespace": "ai", "name": "vllm", "uid": "u-1"}
ALERT = {"name": "LLMHighP99Latency", "labels": {"service": "chat"}}
ALICE = {"user": "alice", "host": "bastion-1"}


def incident(now: float, *, closed: bool = True, context: str = "") -> Incident:
    first = Member(context, "LLMHighP99Latency", {"service": "chat"}, now - 300,
                   now + 40 if closed else None)  # fmt: skip
    second = Member(context, "VllmKVCacheSaturated", {"pod": "vllm-0"}, now - 280,
                    now + 30 if closed else None)  # fmt: skip
    return Incident(
        id=incident_id(first), opened_at=now - 300, members=(first, second),
        cause=Cause("kv_cache", "Deployment ai/vllm", 2, 2),
        explanation="grouped: kv_cache fails on Deployment ai/vllm in 2 of 2 checklists",
        closed_at=now + 100 if closed else None, context=context,
    )  # fmt: skip


def alerts_series(now: float, step: float = 10.0) -> list[Series]:
    """Pending then firing for each alert; both resolved before now + 60."""

    def run(begin: float, end: float) -> list[tuple[float, float]]:
        return [(t, 1.0) for t in range(int(begin), int(end) + 1, int(step))]

    def one(alert: str, labels: dict[str, str], state: str, pts: list[Any]) -> Series:
        return Series({"__name__": "ALERTS", "alertname": alert, "alertstate": state, **labels},
                      pts)  # fmt: skip

    return [
        one("LLMHighP99Latency", {"service": "chat"}, "pending", run(now - 400, now - 310)),
        one("LLMHighP99Latency", {"service": "chat"}, "firing", run(now - 300, now + 30)),
        one("VllmKVCacheSaturated", {"pod": "vllm-0"}, "pending", run(now - 380, now - 290)),
        one("VllmKVCacheSaturated", {"pod": "vllm-0"}, "firing", run(now - 280, now + 20)),
        one("SomethingElse", {"pod": "x"}, "firing", run(now - 300, now)),  # not a member
    ]


def verdict(now: float) -> dict[str, Any]:
    return {
        "id": "abc123-18f", "status": "checked", "alert": "LLMHighP99Latency", "context": "",
        "ran_at": now - 295, "runbook": "llm-latency",
        "steps": [
            {"id": "kv_cache", "status": "fail", "summary": "KV cache 96% used",
             "evidence": [{"label": "KV cache usage", "value": 0.96, "threshold": 0.9,
                           "unit": None, "bad": "above"}]},
            {"id": "gpu_memory", "status": "ok", "summary": "fine", "evidence": []},
            {"id": "gateway", "status": "unknown", "reason": "no ai_gateway series",
             "evidence": []},
        ],
    }  # fmt: skip


def write_log(path: Path, incident_id: str) -> AuditLog:
    """An action proposed, approved, started, succeeded and verified, then a note."""
    log = AuditLog(path, secrets=["hunter2-pass"])
    for transition, extra in (
        ("proposed", {"detail": {"before": {"max_num_seqs": 256}, "after": {"max_num_seqs": 64}}}),
        ("approved", {}),
        ("started", {}),
        ("succeeded", {"outcome": "patched"}),
        ("verified", {"outcome": {"ok": True, "detail": "2 pod(s) run --max-num-seqs 64"}}),
    ):
        log.append(action_id="act-1", transition=transition, action="set-max-num-seqs",
                   target=DEPLOY, actor=ALICE, alert=ALERT, **extra)  # fmt: skip
    log.append(action_id="n-1", transition="noted", action=NOTE_ACTION, actor=ALICE,
               target={"kind": "Incident", "name": incident_id},
               detail={"text": "lowered max-num-seqs; password hunter2-pass"})  # fmt: skip
    # Another alert's action at the same time: not this incident's.
    log.append(action_id="act-2", transition="proposed", action="rebuild-pod", actor=ALICE,
               target={"kind": "Pod", "namespace": "ai", "name": "x"},
               alert={"name": "SomethingElse"})  # fmt: skip
    return log


def read_of(tmp: Path, *, closed: bool = True, alerts: bool = True) -> tuple[Read, AuditLog]:
    now = time.time()
    inc = incident(now, closed=closed)
    log = write_log(tmp / "audit.jsonl", inc.id)
    read = Read(
        inc, start=now - 900, end=now + 160 if closed else now, step=10.0, now=now,
        alerts=alerts_series(now) if alerts else [],
        signals=[Signal("LLMHighP99Latency", "histogram_quantile(0.99, x)",
                        (0.8, 1.1, 2.5, 3.0, 1.0), (">", 1.2), now - 200)],
        verdicts=[verdict(now)], lines=list(log.lines()), report=log.verify(),
    )  # fmt: skip
    return read, log
