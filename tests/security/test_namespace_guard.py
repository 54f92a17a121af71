"""Threat: a proposal (a runbook's, or one built from telemetry's labels) names a namespace
remediations may not act in — `kube-system`, another team's. `guards.namespaces` (else
`kubernetes.namespace` alone) holds for every Kubernetes action that takes a namespace, and
refuses before the cluster is even read: here no Kubernetes API is configured at all, so an
action that read first would fail on that instead of being refused by the guard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oncall.errors import BackendError
from oncall.remediation.action import PlanError
from oncall.remediation.clients import Clients
from oncall.remediation.registry import ACTIONS
from oncall.settings import Settings
from oncall.settings.model import GuardsSettings, KubernetesSettings

#: The least each action needs besides its namespace.
REQUIRED: dict[str, dict[str, Any]] = {
    "rebuild-pod": {"pod": "vllm-0"},
    "scale-deployment": {"deployment": "vllm", "replicas": 3},
    "set-max-num-seqs": {"deployment": "vllm", "value": 64},
}


def namespaced_actions() -> list[str]:
    return sorted(name for name, a in ACTIONS.items() if "namespace" in a.params.model_fields)


def test_every_namespaced_action_is_covered() -> None:
    assert namespaced_actions() == sorted(REQUIRED)


def _clients(tmp_path: Path, **guards: Any) -> Clients:
    kube = KubernetesSettings(kubeconfig=tmp_path / "no-such-kubeconfig", namespace="ai")
    return Clients(Settings(kubernetes=kube, guards=GuardsSettings(**guards)))


@pytest.mark.parametrize("name", sorted(REQUIRED))
@pytest.mark.parametrize("guards", [{}, {"namespaces": ["ai", "ai-canary"]}])
async def test_a_namespace_outside_the_guard_is_refused_before_any_read(
    name: str, guards: dict[str, Any], tmp_path: Path
) -> None:
    action = ACTIONS[name]
    params = action.params(**REQUIRED[name], namespace="kube-system")
    clients = _clients(tmp_path, **guards)
    with pytest.raises(PlanError, match=r"namespace 'kube-system': remediations act only in ai"):
        await action.plan(params, clients)
    assert clients.kube is None  # no Kubernetes client was even made


@pytest.mark.parametrize("name", sorted(REQUIRED))
async def test_an_allowed_namespace_goes_on_to_the_cluster(name: str, tmp_path: Path) -> None:
    """The other side of the guard: `ai-canary`, listed, is read (and fails here only because
    no cluster is configured), so the refusal above is the guard's, not any failure's."""
    action = ACTIONS[name]
    params = action.params(**REQUIRED[name], namespace="ai-canary")
    clients = _clients(tmp_path, namespaces=["ai", "ai-canary"])
    with pytest.raises(BackendError, match="no-such-kubeconfig"):
        await action.plan(params, clients)
