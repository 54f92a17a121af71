"""What one remediation is, as the executor sees it: an `Action` with a parameters model and
five steps (plan, dry run, changed-since-plan, execute, verify).

Each remediation is one module under oncall/remediation/actions/ exporting `ACTION`, an
instance of an `Action` subclass; oncall/remediation/registry.py lists them. The executor runs
every action through the same audited lifecycle and never asks which action it runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from oncall.errors import OncallError
from oncall.model.action_params import ActionParams
from oncall.model.write_path import Plan
from oncall.remediation.capacity import PodsTaken
from oncall.remediation.clients import Clients

P = TypeVar("P", bound=ActionParams)
#: Shows one line of what verification is waiting for.
Say = Callable[[str], None]


class PlanError(OncallError):
    """The action cannot be planned as asked (no such pod, a value only in a config file, …)."""

    exit_code = 1


class TargetChanged(OncallError):
    """`execute` found, in the same atomic step as its write, that the target is no longer
    what the person confirmed (another process wrote first): nothing was changed."""

    exit_code = 1


class Action(ABC, Generic[P]):
    """One remediation. Subclasses set `name` and `params` and write the five steps.

    Steps raise `BackendError` when a backend fails (the executor audits it); `plan` raises
    `PlanError` when the action cannot be planned as asked.
    """

    name: ClassVar[str]
    #: The parameters model; its required fields are the CLI's positional arguments.
    params: type[P]
    #: None: the action holds the Kubernetes Leases of its plan's target and workload while it
    #: runs (oncall/remediation/lease.py). An action whose writes go only to Alertmanager or
    #: Redis needs no Kubernetes to be safe (an on-call without a kubeconfig, or with the API
    #: down, must still be able to silence and acknowledge): it says here what keeps two
    #: processes from spoiling each other's write instead, and the preview shows it.
    unleased: ClassVar[str | None] = None

    def pods_taken(self, plan: Plan) -> PodsTaken | None:
        """The serving pods the action takes away while it runs (an eviction's pod, a
        rollout's or a scale-down's busiest): then every preview and the re-check before the
        write carry the capacity preflight (oncall/remediation/capacity_guard.py). None: the
        action takes no serving pod away."""
        return None

    def allowed_namespace(self, requested: str | None, clients: Clients) -> str:
        """The namespace the action acts in: `requested`, else `kubernetes.namespace`; a
        PlanError, before anything is read, when it is not one remediations may act in
        (`guards.namespaces`, else `kubernetes.namespace` alone): a pod or Deployment named
        by telemetry may be any namespace's."""
        default = clients.settings.kubernetes.namespace
        namespace = requested or default
        allowed = clients.settings.guards.namespaces or [default]
        if namespace not in allowed:
            raise PlanError(
                f"{self.name} in namespace {namespace!r}: remediations act only in "
                f"{', '.join(allowed)} (guards.namespaces)"
            )
        return namespace

    @abstractmethod
    async def plan(self, params: P, clients: Clients) -> Plan:
        """Read the current state and say exactly what will change; change nothing."""

    @abstractmethod
    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        """What the server says it would do, changing nothing."""

    @abstractmethod
    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        """Why the target is no longer what the person confirmed, or None."""

    @abstractmethod
    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        """Make the change; what was done, for the audit and for `verify`."""

    @abstractmethod
    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        """Did it take effect? (ok, what was seen)."""
