"""Who owns a Kubernetes workload, from its own metadata: the operator, Helm release, Argo CD
application or Flux object that re-applies it (docs/architecture.md §3, the write path).

A patch to a Deployment that something else reconciles is undone at that thing's next
reconcile: vLLM production-stack's operator rebuilds the Deployment from its `VLLMRuntime`
and `Owns()` Deployments (so it reconciles on every change), KServe's controller from its
`InferenceService`, Helm on the next `helm upgrade`, Argo CD and Flux on their next sync. The
preview names the owner and where the change belongs instead.

Pure: a function of the object's `metadata` (nothing is read here). Everything in metadata
can be written by anyone who can write the object, so each key is checked the way its tool
checks it, and whatever does not parse is reported as malformed, never trusted or echoed at
length:

- `ownerReferences`: only a *controller* reference (`controller: true`) reconciles; a plain
  owner reference is garbage collection only. Built-in kinds (no API group, or a
  `*.k8s.io` / `apps` / `batch` group) do not reconcile Deployments and are ignored.
- Helm: `meta.helm.sh/release-name` and `meta.helm.sh/release-namespace` annotations (what
  `helm upgrade` checks to adopt an object). The `app.kubernetes.io/managed-by: Helm` label
  alone only says a chart rendered it (`helm template | kubectl apply` sets it too): a hint.
- Argo CD: the `argocd.argoproj.io/tracking-id` annotation (`app:group/kind:namespace/name`),
  trusted only when it names this very object (Argo CD ignores a copied one), or the
  `argocd.argoproj.io/instance` label (a common `application.instanceLabelKey`).
- Flux: `kustomize.toolkit.fluxcd.io/name|namespace` (kustomize-controller) and
  `helm.toolkit.fluxcd.io/name|namespace` (helm-controller) labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

ManagerKind = Literal["operator", "helm", "argocd", "flux", "controller"]

#: Known operators that build a Deployment from a custom resource: (group, kind) → what to say.
KNOWN_OPERATORS: dict[tuple[str, str], str] = {
    ("production-stack.vllm.ai", "VLLMRuntime"): "vLLM production-stack operator",
    ("serving.kserve.io", "InferenceService"): "KServe",
    ("serving.kserve.io", "LLMInferenceService"): "KServe (llm-d)",
    ("serving.knative.dev", "Revision"): "Knative Serving (KServe serverless)",
    ("apps.nvidia.com", "NIMService"): "NVIDIA NIM operator",
}
HELM_RELEASE = "meta.helm.sh/release-name"
HELM_NAMESPACE = "meta.helm.sh/release-namespace"
MANAGED_BY = "app.kubernetes.io/managed-by"
ARGO_TRACKING = "argocd.argoproj.io/tracking-id"
ARGO_INSTANCE = "argocd.argoproj.io/instance"
FLUX_KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
FLUX_HELM = "helm.toolkit.fluxcd.io"
#: Owner references looked at: a real object has one or two; a forged list stops here.
MAX_OWNER_REFERENCES = 16
_SHOWN = 80  # characters of a malformed value shown in a reason
# DNS-1123 subdomain (object names), and an API group (a DNS subdomain too, may be empty).
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")
_BUILTIN_GROUPS = frozenset({"", "apps", "batch", "autoscaling", "policy", "extensions"})


@dataclass(frozen=True)
class Manager:
    """One thing that re-applies the object, and where a lasting change goes instead."""

    kind: ManagerKind
    name: str  # what to call it: "VLLMRuntime ai/vllm", "Helm release ai/vllm"
    change_at: str  # where the change belongs
    #: False: a hint only (a label anyone sets), never enough to refuse a patch on.
    certain: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "change_at": self.change_at,
                "certain": self.certain}  # fmt: skip


@dataclass(frozen=True)
class Ownership:
    """Every manager found, and every key that claimed one but did not parse."""

    managers: tuple[Manager, ...] = ()
    malformed: tuple[str, ...] = ()

    @property
    def certain(self) -> tuple[Manager, ...]:
        return tuple(m for m in self.managers if m.certain)

    def as_dict(self) -> dict[str, Any]:
        return {"managers": [m.as_dict() for m in self.managers],
                "malformed": list(self.malformed)}  # fmt: skip


def shown(value: Any) -> str:
    """A metadata value as a reason may show it: printable, and at most _SHOWN characters."""
    text = "".join(c if c.isprintable() else "?" for c in str(value)[: _SHOWN + 1])
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _name_ok(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 253 and _NAME.fullmatch(value) is not None


def _str_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def ownership(obj: Mapping[str, Any]) -> Ownership:
    """Who re-applies `obj` (a Deployment as the API returns it)."""
    meta = _str_map(obj.get("metadata"))
    labels, annotations = _str_map(meta.get("labels")), _str_map(meta.get("annotations"))
    namespace = str(meta.get("namespace") or "")
    managers: list[Manager] = []
    malformed: list[str] = []
    for finder in (_operators, _helm, _argocd, _flux):
        found, bad = finder(obj, meta, labels, annotations, namespace)
        managers += found
        malformed += bad
    return Ownership(tuple(managers), tuple(malformed))


def _operators(
    _obj: Mapping[str, Any], meta: Mapping[str, Any], _l: Mapping[str, Any],
    _a: Mapping[str, Any], namespace: str,
) -> tuple[list[Manager], list[str]]:  # fmt: skip
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return [], ([] if refs is None else ["ownerReferences: not a list"])
    found: list[Manager] = []
    bad: list[str] = []
    if len(refs) > MAX_OWNER_REFERENCES:
        bad.append(f"ownerReferences: {len(refs)} entries, only the first "
                   f"{MAX_OWNER_REFERENCES} read")  # fmt: skip
    for i, ref in enumerate(refs[:MAX_OWNER_REFERENCES]):
        if not isinstance(ref, Mapping) or ref.get("controller") is not True:
            continue  # garbage collection only: nothing reconciles through it
        api, kind, name = ref.get("apiVersion"), ref.get("kind"), ref.get("name")
        if not (isinstance(api, str) and isinstance(kind, str) and _KIND.fullmatch(kind)
                and _name_ok(name) and 0 < len(api) <= 253):  # fmt: skip
            bad.append(f"ownerReferences[{i}]: not a valid reference "
                       f"({shown(api)}/{shown(kind)} {shown(name)})")  # fmt: skip
            continue
        group = api.rpartition("/")[0] if "/" in api else ""
        if group in _BUILTIN_GROUPS or group.endswith(".k8s.io"):
            continue  # a built-in kind does not rebuild a Deployment's spec
        known = KNOWN_OPERATORS.get((group, kind))
        what = f"{kind} {namespace}/{name}"
        if known is None:
            # An unknown controller may or may not rewrite the spec: said, never refused on.
            found.append(Manager("controller", f"{what} ({api})",
                                 f"the {kind} {name!r} (its controller may revert the change)",
                                 certain=False))  # fmt: skip
        else:
            found.append(Manager("operator", f"{what} ({known})",
                                 f"the spec of {kind} {name} (kubectl edit "
                                 f"{kind.lower()} {name} -n {namespace})"))  # fmt: skip
    return found, bad


def _helm(
    _obj: Mapping[str, Any], _m: Mapping[str, Any], labels: Mapping[str, Any],
    annotations: Mapping[str, Any], _ns: str,
) -> tuple[list[Manager], list[str]]:  # fmt: skip
    release, release_ns = annotations.get(HELM_RELEASE), annotations.get(HELM_NAMESPACE)
    says_helm = labels.get(MANAGED_BY) == "Helm"
    if release is None and release_ns is None:
        if says_helm:
            return [Manager("helm", "a Helm chart (label only, no release annotation)",
                            "the chart's values, wherever they are applied from",
                            certain=False)], []  # fmt: skip
        return [], []
    if not (_name_ok(release) and _name_ok(release_ns)):
        return [], [f"{HELM_RELEASE}/{HELM_NAMESPACE}: not a release "
                    f"({shown(release)!r} in {shown(release_ns)!r})"]  # fmt: skip
    return [
        Manager(
            "helm",
            f"Helm release {release_ns}/{release}",
            f"the release's values (helm upgrade {release} -n {release_ns})",
        )
    ], []


def _argocd(
    obj: Mapping[str, Any], meta: Mapping[str, Any], labels: Mapping[str, Any],
    annotations: Mapping[str, Any], namespace: str,
) -> tuple[list[Manager], list[str]]:  # fmt: skip
    tracking = annotations.get(ARGO_TRACKING)
    if tracking is not None:
        app = _tracking_app(tracking, obj, meta, namespace)
        if app is None:
            return [], [f"{ARGO_TRACKING}: does not name this object ({shown(tracking)!r})"]
        return [Manager("argocd", f"Argo CD application {app}",
                        f"the Git repository of Argo CD application {app!r}")], []  # fmt: skip
    instance = labels.get(ARGO_INSTANCE)
    if instance is None:
        return [], []
    if not _name_ok(instance):
        return [], [f"{ARGO_INSTANCE}: not an application name ({shown(instance)!r})"]
    return [Manager("argocd", f"Argo CD application {instance}",
                    f"the Git repository of Argo CD application {instance!r}")], []  # fmt: skip


def _tracking_app(
    tracking: Any, obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str
) -> str | None:
    """The application of an Argo CD tracking id that names `obj` itself, else None."""
    if not isinstance(tracking, str) or len(tracking) > 1024:
        return None
    app, _, rest = tracking.partition(":")
    group_kind, _, ns_name = rest.partition(":")
    group, _, kind = group_kind.rpartition("/")
    ns, _, name = ns_name.rpartition("/")
    api = str(obj.get("apiVersion") or "apps/v1")
    own_group = api.rpartition("/")[0] if "/" in api else ""
    app_name = app.rpartition("_")[2]  # "<namespace>_<app>" when apps live in many namespaces
    if not _name_ok(app_name):
        return None
    if (group, kind, ns, name) != (own_group, obj.get("kind") or "Deployment",
                                   namespace, meta.get("name")):  # fmt: skip
        return None
    return app


def _flux(
    _obj: Mapping[str, Any], _m: Mapping[str, Any], labels: Mapping[str, Any],
    _a: Mapping[str, Any], _ns: str,
) -> tuple[list[Manager], list[str]]:  # fmt: skip
    found: list[Manager] = []
    bad: list[str] = []
    for prefix, kind in ((FLUX_KUSTOMIZE, "Kustomization"), (FLUX_HELM, "HelmRelease")):
        name, ns = labels.get(f"{prefix}/name"), labels.get(f"{prefix}/namespace")
        if name is None and ns is None:
            continue
        if not (_name_ok(name) and _name_ok(ns)):
            bad.append(f"{prefix}/name|namespace: not a {kind} ({shown(name)!r} in {shown(ns)!r})")
            continue
        where = ("the Git source it applies" if kind == "Kustomization"
                 else "the HelmRelease's values in Git")  # fmt: skip
        found.append(Manager("flux", f"Flux {kind} {ns}/{name}", where))
    return found, bad
