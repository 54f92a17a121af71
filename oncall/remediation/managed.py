"""The managed-workload guard: a patch to a Deployment that something else re-applies
(docs/architecture.md §3, the write path).

The preview names who owns the target (oncall/model/ownership.py) and says the change will be
reverted at that owner's next reconcile, and where to make it instead. `guards.managed_workloads`
decides: `warn` (the default) lets the person go on knowing it; `refuse` refuses a patch to a
Deployment with a certain manager (an operator's controller reference, a Helm release, an
Argo CD or Flux object). A hint only (a Helm label without its release, an unknown
controller) warns under either policy: refusing on a label anyone can set would let a stray
label block a fix.

An ownership that cannot be read (the API did not answer) warns with `refuse` off, and refuses
with it on: under that policy a guard we cannot vouch for is a refusal, as every guard here.
"""

from __future__ import annotations

from typing import Any

from oncall.errors import BackendError
from oncall.model.ownership import Ownership, ownership
from oncall.model.write_path import GuardVerdict, Plan
from oncall.remediation.clients import Clients

GUARD = "managed"


def managed_verdict(owned: Ownership, policy: str) -> GuardVerdict:
    """The guard's line for a Deployment owned as `owned`, under `policy` (warn | refuse)."""
    detail: dict[str, Any] = {**owned.as_dict(), "policy": policy}
    malformed = (
        f"; ignored malformed metadata: {'; '.join(owned.malformed)}" if owned.malformed else ""
    )
    if not owned.managers:
        return GuardVerdict(GUARD, True, f"no operator, Helm, Argo CD or Flux owner{malformed}",
                            detail)  # fmt: skip
    names = ", ".join(m.name for m in owned.managers)
    where = "; ".join(f"change {m.change_at}" for m in owned.managers)
    certain = owned.certain
    if certain and policy == "refuse":
        reason = (f"refuse: managed by {names}: a patch here is reverted at its next reconcile; "
                  f"{where} (guards.managed_workloads: refuse){malformed}")  # fmt: skip
        return GuardVerdict(GUARD, False, reason, detail)
    kind = "WARN" if certain else "warn (hint only)"
    reason = (f"{kind}: managed by {names}: the change will be reverted at its next reconcile; "
              f"{where}{malformed}")  # fmt: skip
    return GuardVerdict(GUARD, True, reason, detail)


def is_managed(verdict: GuardVerdict | None) -> bool:
    """Whether a preview's managed guard found any manager (the revert watch runs then)."""
    return verdict is not None and bool(verdict.detail.get("managers"))


async def managed_guard(plan: Plan, clients: Clients) -> GuardVerdict | None:
    """The guard for a plan that writes a Deployment; None for any other target."""
    if plan.target.kind != "Deployment":
        return None
    policy = clients.settings.guards.managed_workloads
    try:
        kube = await clients.kube_writer()
        deployment = await kube.get_deployment(plan.target.namespace or "", plan.target.name)
    except BackendError as exc:
        ok = policy != "refuse"
        reason = f"ownership unknown (the Deployment was not read: {exc})"
        if not ok:
            reason = f"refuse: {reason}; guards.managed_workloads: refuse"
        return GuardVerdict(GUARD, ok, reason, {"policy": policy, "error": str(exc)})
    return managed_verdict(ownership(deployment), policy)
