"""The `incident-note` audit action goes with the `noted` transition only, and neither with
anything else: a note cannot pass for a remediation, nor a remediation for a note."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncall.audit.log import AuditLog
from oncall.audit.records import NOTE_ACTION, AuditError

TARGET = {"kind": "Incident", "name": "inc-0123456789"}


def test_a_note_is_a_record_of_its_own(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", secrets=["s3cret-value"])
    record = log.append(action_id="n", transition="noted", action=NOTE_ACTION, target=TARGET,
                        detail={"text": "token s3cret-value"})  # fmt: skip
    assert record["detail"]["text"] == "token ***"
    assert log.verify().ok


@pytest.mark.parametrize(
    ("action", "transition"),
    [
        (NOTE_ACTION, "verified"),
        (NOTE_ACTION, "acknowledged"),
        ("set-max-num-seqs", "noted"),
        ("audit-review", "noted"),
    ],
)
def test_a_note_does_not_mix_with_other_records(
    tmp_path: Path, action: str, transition: str
) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    with pytest.raises(AuditError):
        log.append(action_id="n", transition=transition, action=action, target=TARGET)
    assert not log.path.exists()
