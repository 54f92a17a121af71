"""The resource types the simulated API server knows, and its discovery documents.

One `ResourceType` per REST collection: where it lives (group/version/plural), whether it is
namespaced, which verbs it allows and which field selectors it accepts. Everything else in the
simulator is generic over these descriptors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

READ_VERBS = frozenset({"get", "list"})


@dataclass(frozen=True)
class ResourceType:
    """One REST collection of the simulated API server."""

    group: str  # "" is the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    verbs: frozenset[str]
    field_selectors: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The group-qualified resource name used in apiserver messages (`deployments.apps`)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def allows(self, verb: str) -> bool:
        return verb in self.verbs


_META_FIELDS = ("metadata.name", "metadata.namespace")

NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", False, READ_VERBS, ("status.phase",))
NODES = ResourceType(
    "", "v1", "nodes", "Node", False, READ_VERBS | {"patch"}, ("spec.unschedulable",), ("no",)
)
PODS = ResourceType(
    "",
    "v1",
    "pods",
    "Pod",
    True,
    READ_VERBS | {"delete"},
    (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    ("po",),
)
EVENTS = ResourceType(
    "",
    "v1",
    "events",
    "Event",
    True,
    READ_VERBS | {"create", "patch", "delete"},
    (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    ("ev",),
)
CONFIGMAPS = ResourceType(
    "",
    "v1",
    "configmaps",
    "ConfigMap",
    True,
    READ_VERBS | {"create", "update", "patch", "delete"},
    short_names=("cm",),
)
DEPLOYMENTS = ResourceType(
    "apps",
    "v1",
    "deployments",
    "Deployment",
    True,
    READ_VERBS | {"patch", "update"},
    short_names=("deploy",),
)
REPLICASETS = ResourceType(
    "apps", "v1", "replicasets", "ReplicaSet", True, READ_VERBS, short_names=("rs",)
)
LEASES = ResourceType(
    "coordination.k8s.io",
    "v1",
    "leases",
    "Lease",
    True,
    READ_VERBS | {"create", "update", "patch", "delete"},
)
#: Served for list/get (status computed on read, oncall_drill/kube_sim/disruption.py); seeded.
PDBS = ResourceType(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, READ_VERBS,
    short_names=("pdb",),
)  # fmt: skip

#: autoscaling/v2 HPAs: seeded or created; oncall_drill/kube_sim/hpa.py keeps their bounds.
HPAS = ResourceType(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True,
    READ_VERBS | {"create", "update", "patch", "delete"}, short_names=("hpa",),
)  # fmt: skip

#: prometheus-operator's CRD (`kubectl get crd prometheusrules.monitoring.coreos.com`): its
#: discovery entry as the apiserver serves a CRD (shortNames promrule). Read-only here.
PROMETHEUSRULES = ResourceType(
    "monitoring.coreos.com",
    "v1",
    "prometheusrules",
    "PrometheusRule",
    True,
    READ_VERBS,
    short_names=("promrule",),
)

ALL: tuple[ResourceType, ...] = (
    NAMESPACES,
    NODES,
    PODS,
    EVENTS,
    CONFIGMAPS,
    DEPLOYMENTS,
    REPLICASETS,
    LEASES,
    PROMETHEUSRULES,
    PDBS,
    HPAS,
)
BY_KIND: dict[str, ResourceType] = {rt.kind: rt for rt in ALL}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    """The resource type served at /api[s]/<group>/<version>/<plural>, or None."""
    for rt in ALL:
        if (rt.group, rt.version, rt.plural) == (group, version, plural):
            return rt
    return None


def allowed_field_selectors(rt: ResourceType) -> tuple[str, ...]:
    return _META_FIELDS + rt.field_selectors


def api_versions(server_address: str) -> dict[str, Any]:
    """GET /api."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group_list() -> dict[str, Any]:
    """GET /apis."""
    groups: dict[str, list[str]] = {}
    for rt in ALL:
        if rt.group:
            versions = groups.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": name,
                "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
                "preferredVersion": {
                    "groupVersion": f"{name}/{versions[0]}",
                    "version": versions[0],
                },
            }
            for name, versions in groups.items()
        ],
    }


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    """GET /api/v1 or /apis/<group>/<version>; None for an unknown group version."""
    members = [rt for rt in ALL if rt.group == group and rt.version == version]
    if not members:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": members[0].api_version,
        "resources": [
            {
                "name": rt.plural,
                "singularName": rt.kind.lower(),
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": sorted(rt.verbs),
                **({"shortNames": list(rt.short_names)} if rt.short_names else {}),
            }
            for rt in members
        ],
    }
