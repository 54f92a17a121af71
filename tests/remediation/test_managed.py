"""Who owns a Deployment, and the managed guard's verdict under each policy, as data."""

from __future__ import annotations

from typing import Any

import pytest

from oncall.model.ownership import MAX_OWNER_REFERENCES, ownership
from oncall.remediation.managed import is_managed, managed_verdict


def _deployment(
    *,
    refs: Any = None,
    labels: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "vllm", "namespace": "ai"}
    if refs is not None:
        meta["ownerReferences"] = refs
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


def _runtime_ref(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "production-stack.vllm.ai/v1alpha1",
        "kind": "VLLMRuntime",
        "name": "vllm",
        "uid": "1",
        "controller": True,
        "blockOwnerDeletion": True,
        **extra,
    }


def test_a_production_stack_runtime_is_named_with_where_to_change_it() -> None:
    owned = ownership(_deployment(refs=[_runtime_ref()]))
    (manager,) = owned.managers
    assert manager.kind == "operator" and manager.certain
    assert "VLLMRuntime ai/vllm" in manager.name and "production-stack" in manager.name
    assert "kubectl edit vllmruntime vllm -n ai" in manager.change_at


def test_warn_policy_warns_and_refuse_policy_refuses() -> None:
    owned = ownership(_deployment(refs=[_runtime_ref()]))
    warned = managed_verdict(owned, "warn")
    assert warned.ok and warned.reason.startswith("WARN: managed by VLLMRuntime ai/vllm")
    assert "reverted at its next reconcile" in warned.reason
    refused = managed_verdict(owned, "refuse")
    assert not refused.ok and refused.reason.startswith("refuse: managed by")
    assert refused.detail["policy"] == "refuse" and is_managed(refused)


@pytest.mark.parametrize(
    ("metadata", "name"),
    [
        (
            {"annotations": {"meta.helm.sh/release-name": "llm",
                             "meta.helm.sh/release-namespace": "ai"},
             "labels": {"app.kubernetes.io/managed-by": "Helm"}},
            "Helm release ai/llm",
        ),
        (
            {"annotations": {"argocd.argoproj.io/tracking-id": "serving:apps/Deployment:ai/vllm"}},
            "Argo CD application serving",
        ),
        ({"labels": {"argocd.argoproj.io/instance": "serving"}}, "Argo CD application serving"),
        (
            {"labels": {"kustomize.toolkit.fluxcd.io/name": "apps",
                        "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
            "Flux Kustomization flux-system/apps",
        ),
        (
            {"labels": {"helm.toolkit.fluxcd.io/name": "vllm",
                        "helm.toolkit.fluxcd.io/namespace": "ai"}},
            "Flux HelmRelease ai/vllm",
        ),
    ],
)  # fmt: skip
def test_each_gitops_tool_is_named(metadata: dict[str, Any], name: str) -> None:
    owned = ownership(_deployment(**metadata))
    assert [m.name for m in owned.managers] == [name]
    assert owned.certain and not owned.malformed
    assert not managed_verdict(owned, "refuse").ok


def test_a_plain_deployment_passes_under_either_policy() -> None:
    for policy in ("warn", "refuse"):
        verdict = managed_verdict(ownership(_deployment(labels={"app": "vllm"})), policy)
        assert verdict.ok and verdict.reason.startswith("no operator")
        assert not is_managed(verdict)


# -- adversarial --------------------------------------------------------------------------------


def test_an_owner_reference_to_an_unrelated_builtin_kind_is_not_a_manager() -> None:
    refs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1", "controller": True},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "y", "uid": "2",
         "controller": True},
    ]  # fmt: skip
    assert ownership(_deployment(refs=refs)).managers == ()


def test_a_non_controller_owner_reference_is_garbage_collection_only() -> None:
    assert ownership(_deployment(refs=[_runtime_ref(controller=False)])).managers == ()
    assert ownership(_deployment(refs=[_runtime_ref(controller="true")])).managers == ()


def test_an_unknown_controller_warns_as_a_hint_and_is_never_refused_on() -> None:
    ref = _runtime_ref(apiVersion="example.com/v1", kind="Widget")
    owned = ownership(_deployment(refs=[ref]))
    (manager,) = owned.managers
    assert manager.kind == "controller" and not manager.certain
    verdict = managed_verdict(owned, "refuse")
    assert verdict.ok and verdict.reason.startswith("warn (hint only)")


def test_a_helm_label_without_its_release_annotation_is_a_hint_only() -> None:
    owned = ownership(_deployment(labels={"app.kubernetes.io/managed-by": "Helm"}))
    (manager,) = owned.managers
    assert not manager.certain and "label only" in manager.name
    assert managed_verdict(owned, "refuse").ok


def test_forged_and_huge_metadata_is_reported_malformed_short_and_not_trusted() -> None:
    huge = "a" * 100_000
    owned = ownership(
        _deployment(
            refs=[_runtime_ref(name=huge), _runtime_ref(kind="x\x1b[31m", name="vllm")],
            annotations={"meta.helm.sh/release-name": huge,
                         "meta.helm.sh/release-namespace": "ai\n"},
            labels={"argocd.argoproj.io/instance": "Bad Name!",
                    "kustomize.toolkit.fluxcd.io/name": ["not", "a", "string"]},
        )
    )  # fmt: skip
    assert owned.managers == ()
    assert len(owned.malformed) == 5
    verdict = managed_verdict(owned, "refuse")
    assert verdict.ok  # nothing trusted, so nothing to refuse on
    assert len(verdict.reason) < 2_000
    assert "\x1b" not in verdict.reason and "\n" not in verdict.reason
    assert huge not in verdict.reason


def test_a_copied_argocd_tracking_id_naming_another_object_is_not_trusted() -> None:
    tracking = "serving:apps/Deployment:ai/other"  # copied from another Deployment
    owned = ownership(_deployment(annotations={"argocd.argoproj.io/tracking-id": tracking}))
    assert owned.managers == ()
    assert owned.malformed and "does not name this object" in owned.malformed[0]


def test_a_huge_owner_reference_list_is_read_only_up_to_its_bound() -> None:
    refs = [_runtime_ref(name=f"r{i}", controller=False) for i in range(10_000)]
    owned = ownership(_deployment(refs=refs))
    assert owned.managers == ()
    assert f"only the first {MAX_OWNER_REFERENCES} read" in owned.malformed[0]


def test_metadata_of_the_wrong_types_never_raises() -> None:
    metas: list[Any] = [{"ownerReferences": "x"}, {"labels": ["a"]}, {"annotations": 3}, []]
    for meta in metas:
        obj = {"metadata": meta}
        owned = ownership(obj)
        assert owned.managers == ()


class _Unreachable:
    """Clients whose Kubernetes API does not answer."""

    def __init__(self, policy: str) -> None:
        from oncall.settings import Settings

        base = Settings()
        self.settings = base.model_copy(
            update={"guards": base.guards.model_copy(update={"managed_workloads": policy})}
        )

    async def kube_writer(self) -> Any:
        from oncall.errors import BackendError

        raise BackendError("kubernetes", "127.0.0.1:6443", "timeout")


def _deployment_plan(kind: str = "Deployment") -> Any:
    from oncall.model.write_path import Plan, Target

    return Plan(
        action="set-max-num-seqs", params={}, target=Target(kind, "vllm", "ai", None, None),
        before="", after="", request={}, dangerous=True, confirm_word="vllm",
    )  # fmt: skip


def test_an_unreadable_owner_warns_under_warn_and_refuses_under_refuse() -> None:
    import asyncio

    from oncall.remediation.managed import managed_guard

    warned = asyncio.run(managed_guard(_deployment_plan(), _Unreachable("warn")))  # type: ignore[arg-type]
    refused = asyncio.run(managed_guard(_deployment_plan(), _Unreachable("refuse")))  # type: ignore[arg-type]
    assert warned is not None and warned.ok and "ownership unknown" in warned.reason
    assert refused is not None and not refused.ok and refused.reason.startswith("refuse:")
    # Not a Deployment: no guard at all (nothing is read).
    assert asyncio.run(managed_guard(_deployment_plan("Pod"), _Unreachable("refuse"))) is None  # type: ignore[arg-type]
