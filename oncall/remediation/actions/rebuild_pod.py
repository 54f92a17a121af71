"""rebuild-pod: evict one pod (Eviction API, UID precondition); its controller replaces it.

Plan: the pod (UID, resourceVersion, node, Ready), its siblings and its workload (the
Deployment owning its ReplicaSet: the executor holds that workload's Lease too, so two pods of
one Deployment are not rebuilt at once); refused up front when evicting it would leave fewer
Ready replicas than `min_ready` allows. Just before the eviction the count is taken again
(`changed_since_plan`), and the eviction itself is the cluster's own check: the apiserver
refuses it (429) when a PodDisruptionBudget would be broken, atomically, whoever else evicts.

The pod may come from telemetry (GPUXidError's from dcgm-exporter's labels: docs/audit.md,
a lying Prometheus picked any pod, a `kube-system` one too), so it is checked against the
Kubernetes API before any preview: its namespace must be one remediations may act in
(`guards.namespaces`, else `kubernetes.namespace`: refused before the pod is even read), it
must have a controller that replaces it (a Deployment, StatefulSet or ReplicaSet; never a bare
pod, a DaemonSet's or a static one), and when the proposal names the node the GPU is on
(`node`), the API must place the pod there.

Command-line equivalents: `kubectl get pdb -n NS`, then `curl -X POST
…/api/v1/namespaces/NS/pods/NAME/eviction?dryRun=All -d '{"apiVersion":"policy/v1",
"kind":"Eviction","metadata":{"name":NAME},"deleteOptions":{"preconditions":{"uid":…}}}'`
(`kubectl drain` without the cordon), then the same without dryRun, then `kubectl get pods
-l app=… -w` until a new UID is Ready.
"""

from __future__ import annotations

from typing import Any

from oncall.errors import BackendError
from oncall.model.action_params import RebuildPodParams
from oncall.model.write_path import Plan, Precondition, Target
from oncall.remediation.action import Action, PlanError, Say
from oncall.remediation.capacity import PodsTaken
from oncall.remediation.clients import Clients

REPLACE_TIMEOUT_S = 120.0
#: The controllers whose pods rebuild-pod evicts: they create a replacement elsewhere.
REPLACED_BY = ("Deployment", "StatefulSet", "ReplicaSet")
#: The precondition: the pod still has the UID the person confirmed.
UID = "pod uid"


class RebuildPod(Action[RebuildPodParams]):
    name = "rebuild-pod"
    params = RebuildPodParams
    #: Ready replicas of the pod's app that must remain while it is rebuilt.
    min_ready = 1

    def pods_taken(self, plan: Plan) -> PodsTaken:
        """The evicted pod: its sequences go to the others until its replacement is Ready."""
        return PodsTaken(pods=(plan.target.name,))

    async def plan(self, params: RebuildPodParams, clients: Clients) -> Plan:
        namespace = self.allowed_namespace(params.namespace, clients)
        kube = await clients.kube_writer()
        pod = await kube.get_pod(namespace, params.pod)
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        node = (pod.get("spec") or {}).get("nodeName")
        if params.node is not None and params.node != node:
            raise PlanError(
                f"pod {namespace}/{params.pod} runs on node {node or '(none)'} by the "
                f"Kubernetes API, not on {params.node} as the telemetry that named it says"
            )
        notes = []
        if params.uid and params.uid != uid:
            # Keep the UID the person asked about: the server's precondition refuses the delete,
            # and the refusal is audited like any other.
            notes.append(f"pod {params.pod} now has UID {uid}, not {params.uid}")
            uid = params.uid
        labels = meta.get("labels") or {}
        app = labels.get("app")
        siblings = await kube.list_pods(namespace, label_selector=f"app={app}") if app else [pod]
        ready = [p for p in siblings if _serving(p)]
        left = len([p for p in ready if (p.get("metadata") or {}).get("uid") != uid])
        if left < self.min_ready:
            raise PlanError(
                f"rebuilding {params.pod} would leave {left} Ready replica(s) of app={app}; "
                f"policy needs at least {self.min_ready}"
            )
        target = Target("Pod", params.pod, namespace, uid, meta.get("resourceVersion"))
        owner = await kube.owning_workload(namespace, pod)
        if owner is None or owner[0] not in REPLACED_BY:
            what = f"a {owner[0]}'s pod" if owner else "a bare pod (no controller)"
            raise PlanError(
                f"pod {namespace}/{params.pod} is {what}: rebuild-pod evicts only pods a "
                f"{', '.join(REPLACED_BY)} replaces"
            )
        workload = Target(owner[0], owner[1], namespace, owner[2] or None)
        return Plan(
            action=self.name,
            params=params.model_dump(exclude_none=True),
            target=target,
            before=f"pod {params.pod} (UID {uid}, node {node}, {_state(pod)})",
            after=f"a new pod from its controller; {left} other Ready replica(s) meanwhile",
            request={
                "method": "POST",
                "path": f"/api/v1/namespaces/{namespace}/pods/{params.pod}/eviction",
                "body": {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": params.pod, "namespace": namespace},
                    "deleteOptions": {"preconditions": {"uid": uid}},
                },
            },
            dangerous=True,
            confirm_word=params.pod,
            notes=(
                *notes,
                *([f"replicas counted among the pods labelled app={app}"] if app else []),
            ),
            preconditions=(Precondition(UID, uid),),
            workload=workload,
        )

    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        target = plan.target
        kube = await clients.kube_writer()
        namespace, uid = target.namespace or "", target.uid or ""
        await kube.evict_pod(namespace, target.name, uid=uid, dry_run=True)
        return {"server": "eviction accepted (dry run)", "uid": target.uid}

    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        target = plan.target
        kube = await clients.kube_writer()
        try:
            pod = await kube.get_pod(target.namespace or "", target.name)
        except BackendError as exc:
            if exc.reason == "not found":
                return f"pod {target.name} is gone already"
            raise
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        expected = plan.expected(UID)
        if expected is None or uid != expected.expected:
            return f"pod {target.name} was replaced (UID {uid})"
        # "Another Ready replica", again, right before the eviction: Ready and not terminating.
        app = (meta.get("labels") or {}).get("app")
        siblings = await kube.list_pods(target.namespace or "", label_selector=f"app={app}")
        left = [p for p in siblings if _serving(p) and (p.get("metadata") or {}).get("uid") != uid]
        if len(left) < self.min_ready:
            return (
                f"evicting {target.name} now would leave {len(left)} Ready replica(s) of "
                f"app={app}; policy needs at least {self.min_ready}"
            )
        return None

    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        target = plan.target
        kube = await clients.kube_writer()
        namespace = target.namespace or ""
        pod = await kube.get_pod(namespace, target.name)
        app = ((pod.get("metadata") or {}).get("labels") or {}).get("app")
        others = await kube.list_pods(namespace, label_selector=f"app={app}") if app else []
        await kube.evict_pod(namespace, target.name, uid=target.uid or "", dry_run=False)
        return {
            "evicted": target.name,
            "uid": target.uid,
            "selector": f"app={app}" if app else None,
            "other_uids": [(p.get("metadata") or {}).get("uid") for p in others],
        }

    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        target = plan.target
        kube = await clients.kube_writer()
        selector = result.get("selector")
        if not selector:
            return False, "the pod had no app label: cannot tell its replacement"
        say(f"waiting for a replacement of {target.name} to be Ready")
        ignore = [u for u in result.get("other_uids", []) if u and u != target.uid]
        new = await kube.wait_pod_replaced(
            target.namespace or "", selector, target.uid or "", timeout=REPLACE_TIMEOUT_S,
            ignore_uids=ignore,
        )  # fmt: skip
        if new is None:
            return False, f"no Ready replacement within {REPLACE_TIMEOUT_S:g}s"
        meta = new.get("metadata") or {}
        return True, f"replacement {meta.get('name')} (UID {meta.get('uid')}) is Ready"


def _state(pod: dict[str, Any]) -> str:
    return "Ready" if _ready(pod) else "not Ready"


def _serving(pod: dict[str, Any]) -> bool:
    """Ready and not on its way out (a pod being deleted is not a replica to count on)."""
    return _ready(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


ACTION = RebuildPod()
