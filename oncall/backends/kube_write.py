"""Kubernetes, mutating: delete a pod, patch a Deployment, write an Event (Leases: kube_leases).

Only the remediation layer may import this module (an import-linter contract); nothing here asks
for confirmation or writes audit records, the remediation executor does both before it calls in.
kubectl equivalents: `kubectl delete pod NAME --dry-run=server` (plus a UID precondition kubectl
has no flag for), `kubectl patch deployment NAME --type=json -p '[…]'`, `kubectl rollout status
deployment NAME`, `kubectl create -f event.yaml`, `kubectl auth can-i VERB RESOURCE`.

`KubeWriter` is a `KubeReader` (same kubeconfig loading, same bounded httpx exchange, JSON
bodies as dicts) that can also write, Leases included (`LeaseCalls`, mixed in from
oncall/backends/kube_leases.py): the REST calls kubectl makes, with the content type each verb
needs (`application/json-patch+json`, `application/merge-patch+json`), `dryRun=All` for
server-side dry runs and `fieldManager=oncall`. A write is sent once: a retried DELETE or PATCH
could act on an object the operator never saw.

Failures are `BackendError("kubernetes", target, reason, detail)` with the reader's reasons, plus
"forbidden" (403; the detail names user, verb, resource and namespace), "conflict" (409: a UID or
resourceVersion precondition failed, the object exists, or it changed under us), "invalid" (422:
a JSON-patch `test` failed or the object does not validate). A write that times out says so and
that it may still have been applied: read the object back before trying again.

Waiting (`wait_rollout`, `wait_pod_replaced`) polls, bounded in count and time: a blocking watch
would hold a thread that cannot be cancelled before its read timeout (backends.md §2.3 (g)).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from oncall.backends.kube import (
    CLUSTER_SCOPED_KINDS,
    KubeReader,
    Obj,
    RolloutStatus,
    _status_message,
    apis,
    core,
    pod_ready,
    rollout_status_of,
)
from oncall.backends.kube_leases import LeaseCalls
from oncall.errors import BackendError

FIELD_MANAGER = "oncall"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
#: Default pause between two reads while waiting (kubectl polls rollouts every 1–2 s).
POLL_INTERVAL_S = 1.0
_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<namespace>[^"]*)"| (?P<cluster>at the cluster scope))?'
)
_PATCH_TEST_HINT = "a `test` op did not match: the Deployment changed since it was read"


def forbidden_detail(message: str) -> str:
    """`user "U" cannot VERB resource "RES[.GROUP]" in namespace "NS"` from a 403's message."""
    found = _FORBIDDEN.search(message)
    if found is None:
        return message
    resource = found["resource"] + (f".{found['group']}" if found["group"] else "")
    where = f' in namespace "{found["namespace"]}"' if found["namespace"] is not None else ""
    where = " at the cluster scope" if found["cluster"] else where
    return f'user "{found["user"]}" cannot {found["verb"]} resource "{resource}"{where}'


async def _poll(step: Callable[[], Awaitable[bool]], within: float, interval: float) -> None:
    """Await step until it says done: at most ceil(within / interval) + 1 times, `within` s."""
    deadline = time.monotonic() + within
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            for _ in range(math.ceil(within / interval) + 1):
                if await step():
                    return
                await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))


class KubeWriter(KubeReader, LeaseCalls):
    """A KubeReader that may also change the cluster; every call bounded, none retried."""

    def _status_error(self, status: int, body: bytes) -> BackendError:
        if status == 429:
            # The eviction API's PodDisruptionBudget refusal (eviction.go): name the budget.
            _, message = _status_message(body)
            causes = _causes(body)
            detail = f"{message} {causes}".strip() if causes else message
            return self._error("disruption budget", detail or "Too Many Requests", status)
        if status in (403, 409, 422):
            _, message = _status_message(body)
            if status == 403:
                return self._error("forbidden", forbidden_detail(message), status)
            return self._error("conflict" if status == 409 else "invalid", message, status)
        return super()._status_error(status, body)

    async def _write(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        dry_run: bool = False,
        content_type: str = "application/json",
        field_manager: bool = False,
    ) -> Obj:
        """One mutating request; a timeout says the change may have landed."""
        params = {"dryRun": "All" if dry_run else None}
        if field_manager:
            params["fieldManager"] = FIELD_MANAGER
        try:
            return await self._request(
                method, path, params=params, body=body, content_type=content_type
            )
        except BackendError as exc:
            if exc.reason != "timeout":
                raise
            detail = f"{exc.detail}; the change may have been applied: read it back"
            raise self._error("timeout", detail) from exc

    # -- pods and deployments ---------------------------------------------------------------

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str,
        dry_run: bool,
        resource_version: str | None = None,
        grace_period_s: int | None = None,
    ) -> Obj:
        """Delete exactly this pod (UID precondition; resourceVersion too when given).

        `kubectl delete pod NAME -n NS [--dry-run=server]`; answers the Pod (graceful delete).
        "conflict" when the pod under that name is another one (or changed, with a version).
        """
        preconditions = {"uid": uid, "resourceVersion": resource_version}
        options: Obj = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {k: v for k, v in preconditions.items() if v is not None},
            "propagationPolicy": "Background",
        }
        if grace_period_s is not None:
            options["gracePeriodSeconds"] = grace_period_s
        return await self._write("DELETE", core(namespace, "pods", name), options, dry_run=dry_run)

    async def evict_pod(self, namespace: str, name: str, *, uid: str, dry_run: bool) -> Obj:
        """Evict exactly this pod (policy/v1 Eviction, UID precondition): PDBs are honoured.

        `kubectl drain`'s call for one pod. "disruption budget" (429) when a budget would be
        broken (retry later), "conflict" (409) when the pod under that name is another one.
        """
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}, "propagationPolicy": "Background"},
        }
        path = core(namespace, "pods", name, "eviction")
        return await self._write("POST", path, body, dry_run=dry_run)

    async def owning_workload(self, namespace: str, pod: Obj) -> tuple[str, str, str] | None:
        """(kind, name, uid) of the pod's top controller: its ReplicaSet's Deployment, else
        the ReplicaSet (or other controller) itself; None for a bare pod."""
        refs = (pod.get("metadata") or {}).get("ownerReferences") or []
        ref = next((r for r in refs if r.get("controller")), None)
        if ref is None:
            return None
        if ref.get("kind") != "ReplicaSet":
            return str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid") or "")
        rs = await self._get(apis("apps/v1", namespace, "replicasets", str(ref.get("name"))))
        up = next((r for r in (rs.get("metadata") or {}).get("ownerReferences") or []
                   if r.get("controller")), None)  # fmt: skip
        if up is None:
            return "ReplicaSet", str(ref.get("name")), str(ref.get("uid") or "")
        return str(up.get("kind")), str(up.get("name")), str(up.get("uid") or "")

    async def patch_deployment_json(
        self, namespace: str, name: str, ops: list[dict[str, Any]], *, dry_run: bool
    ) -> Obj:
        """`kubectl patch deployment NAME --type=json -p OPS [--dry-run=server]`; the result.

        RFC 6902 is atomic: when a `test` op fails the server changes nothing ("invalid").
        """
        try:
            return await self._patch_json(
                apis("apps/v1", namespace, "deployments", name), ops, dry_run=dry_run
            )
        except BackendError as exc:
            # A field validation failure names its field; a failed `test` gets the generic text.
            tested = any(op.get("op") == "test" for op in ops)
            if exc.reason == "invalid" and tested and " is invalid: " not in exc.detail:
                raise self._error("invalid", f"{exc.detail} ({_PATCH_TEST_HINT})") from exc
            raise

    async def patch_hpa_json(
        self, namespace: str, name: str, ops: list[dict[str, Any]], *, dry_run: bool
    ) -> Obj:
        """`kubectl patch hpa NAME --type=json -p OPS [--dry-run=server]` (autoscaling/v2)."""
        path = apis("autoscaling/v2", namespace, "horizontalpodautoscalers", name)
        return await self._patch_json(path, ops, dry_run=dry_run)

    async def _patch_json(self, path: str, ops: list[dict[str, Any]], *, dry_run: bool) -> Obj:
        """An RFC 6902 JSON patch of the object at `path`, under oncall's field manager."""
        return await self._write(
            "PATCH", path, ops, dry_run=dry_run, content_type=JSON_PATCH, field_manager=True
        )

    async def rollout_status(self, namespace: str, name: str) -> RolloutStatus:
        """`kubectl rollout status deployment NAME -n NS --watch=false`."""
        return rollout_status_of(await self.get_deployment(namespace, name))

    async def wait_rollout(
        self,
        namespace: str,
        name: str,
        *,
        timeout: float,  # noqa: ASYNC109 - past it: the last status, not an exception
        on_progress: Callable[[RolloutStatus], object] | None = None,
        interval: float = POLL_INTERVAL_S,
    ) -> RolloutStatus:
        """`kubectl rollout status deployment NAME --timeout=T`: poll until done or failed.

        `on_progress` hears each new status. Past `timeout`, the last status (done=False).
        """
        seen: list[RolloutStatus] = []

        async def step() -> bool:
            current = await self.rollout_status(namespace, name)
            if on_progress is not None and (not seen or current != seen[-1]):
                on_progress(current)
            seen[:] = [current]
            return current.done or current.failed

        await _poll(step, timeout, interval)
        if not seen:
            raise self._error("timeout", f"no rollout status within {timeout:g}s")
        return seen[-1]

    async def wait_pod_replaced(
        self,
        namespace: str,
        selector: str,
        old_uid: str,
        *,
        timeout: float,  # noqa: ASYNC109 - past it: None, not an exception
        ignore_uids: Collection[str] = (),
        interval: float = POLL_INTERVAL_S,
    ) -> Obj | None:
        """The first Ready pod matching `selector` that is not `old_uid`; None past `timeout`.

        `ignore_uids`: the pods that ran before the delete (with several replicas, they are not
        replacements). `kubectl wait pod -l SEL --for=condition=Ready`.
        """
        skip = {old_uid, *ignore_uids}
        found: list[Obj] = []

        async def step() -> bool:
            pods = await self.list_pods(namespace, label_selector=selector)
            found.extend(p for p in pods if p["metadata"].get("uid") not in skip and pod_ready(p))
            return bool(found)

        await _poll(step, timeout, interval)
        return found[0] if found else None

    # -- events, access reviews, configmaps -------------------------------------------------------

    async def self_subject_review(self) -> Obj:
        """`kubectl auth whoami -o json`: who the server authenticated our credentials as."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        path = apis("authentication.k8s.io/v1", None, "selfsubjectreviews")
        return await self._request("POST", path, body=body)

    async def create_event(
        self,
        namespace: str,
        involved: Mapping[str, str],
        reason: str,
        message: str,
        type: str = "Normal",
    ) -> Obj:
        """A core/v1 Event about `involved` (kind, name, uid, apiVersion), as client-go records.

        `kubectl get events --field-selector involvedObject.name=NAME` shows it.
        """
        stamp = datetime.now(UTC).replace(microsecond=0)
        if not involved.get("kind") or not involved.get("name"):
            raise ValueError("an Event needs the kind and name of the object it is about")
        ref = {k: involved[k] for k in ("kind", "name", "uid", "apiVersion") if involved.get(k)}
        if ref.get("kind") not in CLUSTER_SCOPED_KINDS:
            ref["namespace"] = namespace
        body = {
            # client-go's name: the object's name and the time in nanoseconds, in hex.
            "metadata": {"name": f"{ref['name'][:200]}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        return await self._write("POST", core(namespace, "events"), body)

    async def can_i(
        self, namespace: str, verb: str, resource: str, group: str = "", subresource: str = ""
    ) -> bool | None:
        """`kubectl auth can-i VERB RESOURCE -n NS` (SelfSubjectAccessReview).

        None when the server does not serve access reviews (404): try a server-side dry run.
        """
        attributes = {"namespace": namespace, "verb": verb, "resource": resource, "group": group}
        if subresource:
            attributes["subresource"] = subresource
        body = {"spec": {"resourceAttributes": attributes}}
        try:
            path = apis("authorization.k8s.io/v1", None, "selfsubjectaccessreviews")
            review = await self._request("POST", path, body=body)
        except BackendError as exc:
            if exc.reason == "not found":
                return None
            raise
        return bool((review.get("status") or {}).get("allowed"))

    async def get_configmap(self, namespace: str, name: str) -> Obj:
        """`kubectl get configmap NAME -n NS -o json`."""
        return await self._get(core(namespace, "configmaps", name))

    async def patch_configmap(
        self, namespace: str, name: str, data: Mapping[str, str | None], *, dry_run: bool
    ) -> Obj:
        """`kubectl patch configmap NAME --type=merge -p '{"data": …}'`; None removes a key."""
        return await self._write(
            "PATCH",
            core(namespace, "configmaps", name),
            {"data": dict(data)},
            dry_run=dry_run,
            content_type=MERGE_PATCH,
            field_manager=True,
        )


def _causes(body: Any) -> str:
    """The `details.causes` messages of a Status body, joined ("" when none)."""
    try:
        causes = json.loads(body).get("details", {}).get("causes") or []
        return "; ".join(str(c.get("message")) for c in causes if c.get("message"))
    except (TypeError, ValueError, AttributeError):
        return ""
