"""What a remediation will do, exactly: its target (with UID and resourceVersion), before → after,
the request it will send, and how to undo it. Plans read the cluster and Redis; they change nothing.

`plan(action, params, clients)` validates the parameters with the action's model
(oncall/model/actions.py) and reads the current state:

- rebuild-pod: the pod (UID, resourceVersion, node, Ready) and its siblings; refused up front
  when deleting it would leave fewer Ready replicas than `min_ready` allows.
- set-degradation-level: the current level from the configured store (Redis key or ConfigMap).
- set-max-num-seqs: the Deployment, the current value in whatever form its args hold it, and
  the JSON patch (a `test` op on the exact element, then `replace`) plus its inverse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oncall.backends.kube_write import KubeWriter
from oncall.backends.redis import RedisClient
from oncall.errors import OncallError
from oncall.model.actions import (
    ACTION_PARAMS,
    RebuildPodParams,
    SetDegradationLevelParams,
    SetMaxNumSeqsParams,
)
from oncall.model.patches import find_container, max_num_seqs_patch
from oncall.model.vllm_args import parse_max_num_seqs
from oncall.settings import Settings

LEVELS = {0: "normal", 1: "RAG off, base LLM only", 2: "LLM off, FAQ answers", 3: "static page"}


class PlanError(OncallError):
    """The action cannot be planned as asked (no such pod, a value only in a config file, …)."""

    exit_code = 1


@dataclass(frozen=True)
class Target:
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None

    @property
    def label(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    @property
    def key(self) -> str:
        """Stable id for guards and the Lease name: kind-namespace-name, lowercase."""
        return "-".join(p for p in (self.kind, self.namespace or "", self.name) if p).lower()

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class Plan:
    action: str
    params: dict[str, Any]
    target: Target
    before: Any
    after: Any
    request: dict[str, Any]
    dangerous: bool
    #: What the person must type: the target's name for dangerous actions, else "yes".
    confirm_word: str
    undo: dict[str, Any] | None = None  # the parameters of the rollback, when there is one
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        return f"{self.action} {self.target.label}: {self.before} → {self.after}"


@dataclass
class Clients:
    """The clients a remediation uses; made by the executor, closed by it."""

    settings: Settings
    kube: KubeWriter | None = None
    redis: RedisClient | None = None

    async def kube_writer(self) -> KubeWriter:
        if self.kube is None:
            self.kube = await KubeWriter.open(self.settings.kubernetes)
        return self.kube

    def redis_client(self) -> RedisClient:
        if self.redis is None:
            settings = self.settings.redis
            password = settings.password.get_secret_value() if settings.password else None
            self.redis = RedisClient(settings.url, timeout=settings.timeout, password=password)
        return self.redis

    async def aclose(self) -> None:
        if self.kube is not None:
            self.kube.close()
        if self.redis is not None:
            await self.redis.aclose()


async def plan(action: str, raw: dict[str, Any], clients: Clients, *, min_ready: int = 1) -> Plan:
    model = ACTION_PARAMS.get(action)
    if model is None:
        raise PlanError(f"unknown action {action!r}; known: {', '.join(ACTION_PARAMS)}")
    try:
        params = model.model_validate(raw)
    except ValueError as exc:
        raise PlanError(f"{action}: {exc}") from exc
    if isinstance(params, RebuildPodParams):
        return await _rebuild_pod(params, clients, min_ready)
    if isinstance(params, SetDegradationLevelParams):
        return await _degradation(params, clients)
    assert isinstance(params, SetMaxNumSeqsParams)
    return await _max_num_seqs(params, clients)


async def _rebuild_pod(params: RebuildPodParams, clients: Clients, min_ready: int) -> Plan:
    namespace = params.namespace or clients.settings.kubernetes.namespace
    kube = await clients.kube_writer()
    pod = await kube.get_pod(namespace, params.pod)
    meta = pod.get("metadata") or {}
    uid = meta.get("uid")
    notes = []
    if params.uid and params.uid != uid:
        # Keep the UID the person asked about: the server's precondition refuses the delete,
        # and the refusal is audited like any other.
        notes.append(f"pod {params.pod} now has UID {uid}, not {params.uid}")
        uid = params.uid
    labels = meta.get("labels") or {}
    app = labels.get("app")
    siblings = await kube.list_pods(namespace, label_selector=f"app={app}") if app else [pod]
    ready = [p for p in siblings if _ready(p)]
    left = len([p for p in ready if (p.get("metadata") or {}).get("uid") != uid])
    if left < min_ready:
        raise PlanError(
            f"rebuilding {params.pod} would leave {left} Ready replica(s) of app={app}; "
            f"policy needs at least {min_ready}"
        )
    target = Target("Pod", params.pod, namespace, uid, meta.get("resourceVersion"))
    node = (pod.get("spec") or {}).get("nodeName")
    return Plan(
        action="rebuild-pod",
        params=params.model_dump(exclude_none=True),
        target=target,
        before=f"pod {params.pod} (UID {uid}, node {node}, {_state(pod)})",
        after=f"a new pod from its controller; {left} other Ready replica(s) meanwhile",
        request={
            "method": "DELETE",
            "path": f"/api/v1/namespaces/{namespace}/pods/{params.pod}",
            "body": {"preconditions": {"uid": uid}},
        },
        dangerous=True,
        confirm_word=params.pod,
        notes=[*notes, *([f"selector app={app}"] if app else [])],
    )


def _state(pod: dict[str, Any]) -> str:
    return "Ready" if _ready(pod) else "not Ready"


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def current_level(clients: Clients) -> str | None:
    """The degradation level as the configured store holds it now (None: not set)."""
    settings = clients.settings
    if settings.degradation.store == "redis":
        return await clients.redis_client().get(settings.degradation.redis_key)
    kube = await clients.kube_writer()
    cm = await kube.get_configmap(settings.kubernetes.namespace, settings.degradation.configmap)
    value = (cm.get("data") or {}).get(settings.degradation.configmap_key)
    return None if value is None else str(value)


async def _degradation(params: SetDegradationLevelParams, clients: Clients) -> Plan:
    settings = clients.settings.degradation
    before = await current_level(clients)
    old = int(before) if before and before.isdigit() else 0
    if old == params.level:
        raise PlanError(f"the degradation level is already {params.level} ({LEVELS[old]})")
    if settings.store == "redis":
        target = Target("RedisKey", settings.redis_key)
        request: dict[str, Any] = {"command": ["SET", settings.redis_key, str(params.level)]}
    else:
        namespace = clients.settings.kubernetes.namespace
        target = Target("ConfigMap", settings.configmap, namespace)
        request = {
            "method": "PATCH",
            "path": f"/api/v1/namespaces/{namespace}/configmaps/{settings.configmap}",
            "body": {"data": {settings.configmap_key: str(params.level)}},
        }
    return Plan(
        action="set-degradation-level",
        params=params.model_dump(),
        target=target,
        before=f"level {old} ({LEVELS[old]})" + ("" if before is not None else ", not set"),
        after=f"level {params.level} ({LEVELS[params.level]})",
        request=request,
        dangerous=params.level >= 2,
        confirm_word=target.name if params.level >= 2 else "yes",
        undo={"level": old},
        notes=[f"raw value before: {before!r}"],
    )


async def _max_num_seqs(params: SetMaxNumSeqsParams, clients: Clients) -> Plan:
    namespace = params.namespace or clients.settings.kubernetes.namespace
    kube = await clients.kube_writer()
    deployment = await kube.get_deployment(namespace, params.deployment)
    try:
        ops = max_num_seqs_patch(deployment, params.container, params.value)
        _, container = find_container(deployment, params.container)
    except ValueError as exc:
        raise PlanError(f"set-max-num-seqs on {namespace}/{params.deployment}: {exc}") from exc
    parsed = parse_max_num_seqs(container.get("command") or [], container.get("args") or [])
    meta = deployment.get("metadata") or {}
    target = Target(
        "Deployment", params.deployment, namespace, meta.get("uid"), meta.get("resourceVersion")
    )
    return Plan(
        action="set-max-num-seqs",
        params=params.model_dump(exclude_none=True),
        target=target,
        before=f"--max-num-seqs {parsed.value} ({parsed.form} form, "
        f"container {container.get('name')})",
        after=f"--max-num-seqs {params.value}, rolled out to every pod",
        request={
            "method": "PATCH",
            "path": f"/apis/apps/v1/namespaces/{namespace}/deployments/{params.deployment}",
            "content_type": "application/json-patch+json",
            "body": ops,
        },
        dangerous=True,
        confirm_word=params.deployment,
        undo=None
        if parsed.value is None
        else {**params.model_dump(exclude_none=True), "value": parsed.value},
    )
