"""What a remediation's audit records go through: the log the write path needs, and one run's.

`Log` is what the executor, the rollback and the approval need of the audit log
(oncall.audit.log.AuditLog), so a unit test hands them a fake; `VerifiableLog` is a log whose
hash chain can be checked, the only kind a rollback plans from. `Run` is one action's id and
the records written for it so far, which its `Outcome` carries back to the front end.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from oncall.model.write_path import GuardVerdict, Outcome, OutcomeStatus, Plan, Preview


class Log(Protocol):
    """What the executor needs of the audit log (oncall.audit.log.AuditLog)."""

    @property
    def path(self) -> Any: ...

    def append(self, **fields: Any) -> dict[str, Any]: ...

    def records(self) -> Iterator[dict[str, Any]]: ...


@runtime_checkable
class VerifiableLog(Protocol):
    """A log whose hash chain can be checked (AuditLog): what `rollback.undo_of` plans from."""

    def verify(self) -> Any: ...  # a report with `ok` and `problems` (oncall.audit.chain)


@dataclass
class Run:
    """One action's id and the audit records written for it so far."""

    action_id: str
    plan: Plan
    preview: Preview | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    def end(
        self, status: OutcomeStatus, message: str, refusal: GuardVerdict | None = None
    ) -> Outcome:
        return Outcome(
            self.action_id, status, message, self.plan, self.preview, refusal, tuple(self.records)
        )
