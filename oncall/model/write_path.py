"""What a remediation is made of on its way through the write path, as plain frozen values.

The remediation executor makes them; the service hands them on; the CLI prints them and the
app's confirm modal shows them. They live here, apart from the executor, for the same reason
the checklist's events live in `checklist_events`: a screen holds and renders them without
importing the Kubernetes and Redis writers, the guards or the audit log.

    Cluster    where it acts: the settings context, its kube context and API server
    Plan       what an action will do: exact target, before → after, request, preconditions
    Preview    the plan with the server's dry run and every guard's verdict
    Outcome    how the executor's lifecycle ended, with the audit records it wrote
    RemediationResult   what a front end shows of it (also "not planned")
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

OutcomeStatus = Literal["refused", "declined", "failed", "succeeded", "verified", "unverified"]
#: An outcome's status, or "not planned": the action could not even be planned (not audited).
ResultStatus = OutcomeStatus | Literal["not planned"]


@dataclass(frozen=True)
class Target:
    """Exactly what an action changes: kind, name, namespace and the UID it was planned on."""

    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None

    @property
    def label(self) -> str:
        """'Deployment ai/vllm'."""
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    @property
    def key(self) -> str:
        """Stable id for guards and the Lease name: kind-namespace-name, lowercase."""
        return "-".join(p for p in (self.kind, self.namespace or "", self.name) if p).lower()

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class Cluster:
    """Where a plan acts: the context of `contexts:` (or the one `context.name`), the kube
    context and API server its kubeconfig leads to, and whether it is production. The
    executor stamps it on every plan it makes and refuses a plan of another context."""

    context: str
    kube_context: str | None = None
    server: str | None = None
    production: bool = False

    @property
    def label(self) -> str:
        """`context us (production) · kube context kind-us · API server https://…`."""
        kind = " (production)" if self.production else ""
        return (
            f"context {self.context}{kind} · kube context {self.kube_context or 'unknown'} · "
            f"API server {self.server or 'unknown'}"
        )


@dataclass(frozen=True)
class Precondition:
    """One fact the plan was made on, compared again just before the write.

    `what` names the fact ("stored level", "pod uid"); `expected` is its value when the plan
    was made, as the backend returned it (None: not set).
    """

    what: str
    expected: Any


@dataclass(frozen=True)
class Plan:
    """What an action will do: before → after, the exact request, how it is confirmed."""

    action: str
    params: dict[str, Any]
    target: Target
    before: Any
    after: Any
    request: dict[str, Any]
    dangerous: bool
    #: What the person types before Yes is allowed: the target's name for dangerous actions.
    confirm_word: str
    undo: dict[str, Any] | None = None  # the parameters of the rollback, when there is one
    notes: tuple[str, ...] = ()  # for the person; nothing reads them back
    preconditions: tuple[Precondition, ...] = ()
    #: The action's own verdicts on what it plans (e.g. a value the workload would reject):
    #: shown in the preview with the guards'; a refusing one refuses the action.
    checks: tuple[GuardVerdict, ...] = ()
    #: The workload the change touches beyond its target (a rebuilt pod's Deployment): its
    #: Lease is taken with the target's, so two pods of one workload are not acted on at once.
    workload: Target | None = None
    #: Where it acts; None only before the executor stamps it (`Remediator.plan`).
    cluster: Cluster | None = None

    @property
    def needs_typing(self) -> bool:
        """The person types `confirm_word`: a dangerous action, or any in production."""
        return self.dangerous or (self.cluster is not None and self.cluster.production)

    @property
    def lease_targets(self) -> tuple[Target, ...]:
        """The targets whose Leases the action holds while it runs: the target, its workload."""
        return (self.target,) if self.workload is None else (self.target, self.workload)

    @property
    def summary(self) -> str:
        return f"{self.action} {self.target.label}: {self.before} → {self.after}"

    def expected(self, what: str) -> Precondition | None:
        """The precondition named `what`, when the plan has one."""
        return next((p for p in self.preconditions if p.what == what), None)


@dataclass(frozen=True)
class GuardVerdict:
    """What one guard said about one action: `ok` lets it pass; `reason` is for the operator.
    `detail` carries the guard's facts, e.g. the Lease's holder and since."""

    guard: str
    ok: bool
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)
    #: A refusal a person may go past by typing this phrase before the confirmation word
    #: (the capacity preflight's `refuse`); None: no phrase lets anyone past it.
    override: str | None = None
    #: Passes, but the person must read it (a capacity estimate, a fact that was not read).
    warning: bool = False

    @property
    def holder(self) -> str | None:
        """Who holds the target's Lease, when this is a refusal by the lease guard."""
        holder = self.detail.get("holder")
        return str(holder) if holder else None

    @property
    def since(self) -> str | None:
        since = self.detail.get("since")
        return str(since) if since else None


@dataclass(frozen=True)
class Preview:
    """What the person decides on: the plan, the server's dry run, every guard's verdict."""

    plan: Plan
    dry_run: Any
    verdicts: tuple[GuardVerdict, ...] = ()

    @property
    def refused(self) -> tuple[GuardVerdict, ...]:
        """The verdicts that refuse the action; with any, the action cannot be confirmed. A
        refusal with an `override` phrase is not among them: the plan's confirmation word then
        starts with that phrase (oncall/remediation/capacity_guard.py)."""
        return tuple(v for v in self.verdicts if not v.ok and v.override is None)

    @property
    def refusal(self) -> GuardVerdict | None:
        """The first refusing verdict, the one an outcome reports."""
        return next(iter(self.refused), None)


@dataclass(frozen=True)
class Outcome:
    """How one remediation's lifecycle ended; `records` are the audit records it wrote."""

    action_id: str
    status: OutcomeStatus
    message: str
    plan: Plan
    preview: Preview | None = None
    #: The verdict that refused it, when refused.
    refusal: GuardVerdict | None = None
    records: tuple[dict[str, Any], ...] = ()

    @property
    def undo_command(self) -> str | None:
        """The command that undoes a verified change, when it can be undone."""
        if self.status == "verified" and self.plan.undo:
            return f"oncall remediate rollback {self.action_id}"
        return None


@dataclass(frozen=True)
class RemediationResult:
    """How one remediation ended, as a front end shows it.

    `action_id` is the audit log's id of the action (None when not planned).
    """

    status: ResultStatus
    message: str
    action_id: str | None = None
    #: The refusing guard's verdict, when refused (the lease guard's names the holder).
    refusal: GuardVerdict | None = None
    #: The command that undoes a verified change, when it can be undone.
    undo_command: str | None = None

    @classmethod
    def of(cls, outcome: Outcome) -> RemediationResult:
        return cls(
            outcome.status, outcome.message, outcome.action_id, outcome.refusal,
            outcome.undo_command,
        )  # fmt: skip


#: Shows the preview and returns the person's answer (True: go ahead).
Confirm = Callable[[Preview], Awaitable[bool]]
#: Shows one line of what a running action is doing.
Progress = Callable[[str], None]


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _label(verdict: GuardVerdict) -> str:
    if verdict.ok:
        return "WARN   " if verdict.warning else "ok     "
    return "REFUSED"  # one a phrase overrides says so in its reason


def render_preview(preview: Preview) -> str:
    """The preview as text: what the CLI prints and the two-person approver is shown."""
    plan = preview.plan
    lines = [
        f"{plan.action} {plan.target.label}"
        + (f" (UID {plan.target.uid})" if plan.target.uid else ""),
        f"  before:  {plan.before}",
        f"  after:   {plan.after}",
        f"  request: {_show(plan.request)}",
        f"  dry run: {_show(preview.dry_run)}",
        *([f"  in:      {plan.cluster.label}"] if plan.cluster else []),
        *(f"  note:    {note}" for note in plan.notes),
        *(["  guards:"] if preview.verdicts else []),  # none: the approver's live preview
    ]
    lines += [f"    {_label(v)} {v.guard}: {v.reason}" for v in preview.verdicts]
    return "\n".join(lines)
