"""Kubernetes, read-only: pods, events, deployments and nodes as the API server's JSON.

kubectl equivalents: `kubectl get pods -l SEL -o json`, `kubectl get pod NAME -o json`,
`kubectl get events --field-selector involvedObject.kind=K,involvedObject.name=N -o json`,
`kubectl get deployment NAME -o json`, `kubectl get nodes -l SEL -o json`, `kubectl logs
NAME -c C --previous --tail=N` (text, not JSON). Nothing here
changes the cluster; writes live in a separate module that only remediation imports.

Requests go over httpx (`oncall.backends.kube_http`), authenticated from the kubeconfig the way
kubectl and the official client read it (`oncall.backends.kube_config`: certificates, tokens,
token files, exec plugins, in-cluster service accounts). The official `kubernetes` package is
not used at run time: its import and client set-up cost ~0.4 s of every fresh `oncall check`
and it requires aiohttp (docs/PERFORMANCE.md). Answers are plain dicts, the server's own
camelCase JSON.

Lists are paged (`limit` + `continue`, `LIST_PAGE` items a page, at most `LIST_MAX_PAGES`
pages), with selectors sent to the server; a continue token that expired (410 Gone) restarts
the list once. A list that would pass the bound is "too large", never cut silently.

An answer is read only if it is what was asked for, as kubectl decodes by `kind`: one object
has the `kind` asked for and a `metadata.name`; a list the `KindList` kind and `items`, each
with `metadata`. Anything else, JSON though it is (`{"hello": "world"}` from a proxy or a
lying server), is "bad payload", so a probe's facts never read a missing field as a finding
("0/1 ready").

Failures are `BackendError("kubernetes", target, reason)` with reason "refused", "timeout",
"unreachable", "disconnected", "tls", "config", "bad payload", "too large", "not found" (a
Status NotFound), "auth" (401/403, as for every backend: a 403 carries the server's message
naming the verb and resource) or "http <code>"; `http_status` is set for HTTP errors. The
target reads "CONTEXT (https://SERVER)".

`rollout_status_of` (`kubectl rollout status`'s rule) and `pod_ready` are pure readings of that
JSON; the writer (`oncall.backends.kube_write`) waits on them.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import quote

from oncall.backends.http import status_reason
from oncall.backends.kube_http import BACKEND, KubeHttp
from oncall.errors import BackendError
from oncall.settings.model import KubernetesSettings

__all__ = ["BACKEND", "CLUSTER_SCOPED_KINDS", "KubeReader", "Obj", "pod_ready"]

Obj = dict[str, Any]
#: Kinds whose objects are cluster-scoped: their events are found in any namespace.
CLUSTER_SCOPED_KINDS = frozenset({"Node", "Namespace", "PersistentVolume", "StorageClass"})
#: kubectl's default chunk size (`--chunk-size=500`).
LIST_PAGE = 500
#: 20 pages of 500: four times the 5,000-pod fleet; more than that is not an on-call read.
LIST_MAX_PAGES = 20


def _status_message(body: str | bytes | None) -> tuple[str | None, str]:
    """(reason, message) of a metav1.Status body; the raw text when it is not one."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body or ""
    try:
        status = json.loads(text)
    except ValueError:
        return None, text.strip()[:200]
    if not isinstance(status, dict):
        return None, str(status)[:200]
    return status.get("reason"), str(status.get("message") or "")


def _shape(body: Obj) -> str:
    """What an unexpected answer is, briefly: its kind, or its first keys."""
    if body.get("kind"):
        return repr(str(body["kind"])[:60])
    keys = ", ".join(repr(str(k)[:30]) for k in list(body)[:4])
    return f"an object with keys {keys}" if keys else "an empty object"


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") for p in parts)


def core(namespace: str | None, resource: str, *rest: str) -> str:
    """`/api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]]`."""
    scope = ("namespaces", namespace) if namespace is not None else ()
    return "/api/v1" + _path(*scope, resource, *rest)


def apis(api: str, namespace: str | None, resource: str, *rest: str) -> str:
    """`/apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUB]]`."""
    scope = ("namespaces", namespace) if namespace is not None else ()
    return f"/apis/{api}" + _path(*scope, resource, *rest)


@dataclass(frozen=True)
class RolloutStatus:
    """Where a Deployment's rollout stands, by the rule of `kubectl rollout status`."""

    done: bool
    message: str
    failed: bool = False  # Progressing=False with ProgressDeadlineExceeded: it will not finish
    generation: int = 0
    observed_generation: int = 0
    replicas: int = 0  # wanted (spec)
    updated: int = 0
    available: int = 0
    total: int = 0  # status.replicas: old and new pods that still run


def rollout_status_of(deployment: Obj) -> RolloutStatus:
    """Port of kubectl's DeploymentStatusViewer (pkg/polymorphichelpers/rollout_status.go)."""
    meta, spec = deployment.get("metadata") or {}, deployment.get("spec") or {}
    status = deployment.get("status") or {}
    name = meta.get("name", "?")
    want, total = int(spec.get("replicas", 1)), int(status.get("replicas") or 0)
    updated, available = (int(status.get(k) or 0) for k in ("updatedReplicas", "availableReplicas"))
    generation, observed = (
        int(meta.get("generation") or 0),
        int(status.get("observedGeneration") or 0),
    )

    def result(done: bool, message: str, failed: bool = False) -> RolloutStatus:
        counts = (generation, observed, want, updated, available, total)
        return RolloutStatus(done, message, failed, *counts)

    if generation > observed:
        return result(False, "Waiting for deployment spec update to be observed")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return result(False, f'deployment "{name}" exceeded its progress deadline', True)
    if updated < want:
        return result(False, f"{updated} out of {want} new replicas have been updated")
    if total > updated:
        return result(False, f"{total - updated} old replicas are pending termination")
    if available < updated:
        return result(False, f"{available} of {updated} updated replicas are available")
    return result(True, f'deployment "{name}" successfully rolled out')


def pod_ready(pod: Obj) -> bool:
    """Ready condition True and not terminating."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class KubeReader:
    """One API server connection for one context; every method is a bounded, read-only GET."""

    def __init__(self, http: KubeHttp) -> None:
        self._http = http
        self.server_date: str | None = None  # the last answer's Date header
        self.timeout = http.timeout
        self.target = http.target

    @staticmethod
    def import_client() -> None:
        """Import what the first request needs (for callers that warm up early): cheap now."""
        import oncall.backends.kube_exec  # noqa: F401

    @classmethod
    async def open(cls, settings: KubernetesSettings) -> Self:
        """Load the kubeconfig (or in-cluster config) off the event loop and make a reader."""
        from oncall.backends.kube_config import KubeConfigError, kubeconfig_paths, load_connection

        try:
            conn = await asyncio.to_thread(load_connection, settings)
        except KubeConfigError as exc:
            where = settings.context or ":".join(map(str, kubeconfig_paths(settings))) or "kube"
            raise BackendError(BACKEND, where, "config", str(exc)) from exc
        target = f"{conn.context} ({conn.server})"
        http = KubeHttp(conn, timeout=settings.timeout, target=target)
        await http.prepare()
        return cls(http)

    def close(self) -> None:
        """Close the connection pool (as a task when a loop runs)."""
        self._http.close()

    async def aclose(self) -> None:
        await self._http.aclose()

    def _error(self, reason: str, detail: str = "", status: int | None = None) -> BackendError:
        return self._http.error(reason, detail, status)

    def _status_error(self, status: int, body: bytes) -> BackendError:
        """The BackendError of an HTTP error answer."""
        reason, message = _status_message(body)
        if status == 404 and reason == "NotFound":
            return self._error("not found", message, status)
        return self._error(status_reason(status), message, status)

    async def _raw(self, method: str, path: str, **kwargs: Any) -> bytes:
        response = await self._http.send(method, path, **kwargs)
        # The apiserver's clock (RFC 9110 Date, whole seconds): Lease times are judged by it,
        # not by this host's (oncall/backends/kube_leases.py).
        self.server_date = response.headers.get("date")
        if response.status_code >= 400:
            raise self._status_error(response.status_code, response.content)
        return response.content

    async def _request(self, method: str, path: str, **kwargs: Any) -> Obj:
        """One request; its JSON object (anything else, an HTML page say, is "bad payload")."""
        body = await self._raw(method, path, **kwargs)
        try:
            decoded = json.loads(body)
        except ValueError as exc:
            start = body[:60].decode("utf-8", errors="replace").strip()
            raise self._error("bad payload", f"not JSON: {start!r}") from exc
        if not isinstance(decoded, dict):
            raise self._error("bad payload", f"expected an object, got {type(decoded).__name__}")
        return decoded

    async def _get(self, path: str, **params: Any) -> Obj:
        return await self._request("GET", path, params=params)

    async def _get_object(self, path: str, kind: str) -> Obj:
        """One object of `kind`: anything else is "bad payload" (see the module docstring)."""
        body = await self._get(path)
        metadata = body.get("metadata")
        if body.get("kind") != kind or not isinstance(metadata, dict) or not metadata.get("name"):
            raise self._error("bad payload", f"expected a {kind}, got {_shape(body)}")
        return body

    async def _list(
        self,
        path: str,
        kind: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        """All items of a list, page by page (`limit` + `continue`), bounded."""
        query = {"labelSelector": label_selector, "fieldSelector": field_selector}
        items: list[Obj] = []
        token: str | None = None
        restarted = False
        for _ in range(LIST_MAX_PAGES + 1):
            try:
                body = await self._get(path, limit=LIST_PAGE, **query, **{"continue": token})
            except BackendError as exc:
                if exc.http_status != 410 or restarted or token is None:
                    raise
                # The token expired (etcd compacted its revision): list again from the start,
                # once, as client-go's pager does, bounded like the first.
                items, token, restarted = [], None, True
                continue
            page = body.get("items")
            if not isinstance(page, list) or not all(isinstance(i, dict) for i in page):
                raise self._error("bad payload", f"{body.get('kind') or 'list'} without items")
            if body.get("kind") != f"{kind}List" or not all(
                isinstance(i.get("metadata"), dict) for i in page
            ):
                raise self._error("bad payload", f"expected a {kind}List, got {_shape(body)}")
            items.extend(page)
            token = (body.get("metadata") or {}).get("continue") or None
            if token is None:
                return items
        bound = LIST_PAGE * LIST_MAX_PAGES
        raise self._error("too large", f"more than {bound} items in {path}: narrow the selector")

    async def list_pods(
        self,
        namespace: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        """`kubectl get pods -n NS [-l SEL] [--field-selector F] -o json` → the items."""
        return await self._list(
            core(namespace, "pods"),
            "Pod",
            label_selector=label_selector,
            field_selector=field_selector,
        )

    async def list_all_pods(self) -> list[Obj]:
        """`kubectl get pods -A -o json` → the items (what the node-fit check counts)."""
        return await self._list(core(None, "pods"), "Pod")

    async def get_pod(self, namespace: str, name: str) -> Obj:
        """`kubectl get pod NAME -n NS -o json`; "not found" when there is none."""
        return await self._get_object(core(namespace, "pods", name), "Pod")

    async def list_events(
        self, namespace: str | None, kind: str | None = None, name: str | None = None
    ) -> list[Obj]:
        """Events about objects of `kind` (and `name`), in `namespace` or (None) in all.

        `kubectl get events [-n NS | -A] --field-selector involvedObject.kind=K,…=N -o json`;
        unordered, as the server returns them.
        """
        selectors = []
        if kind:
            selectors.append(f"involvedObject.kind={kind}")
        if name:
            selectors.append(f"involvedObject.name={name}")
        return await self._list(
            core(namespace, "events"), "Event", field_selector=",".join(selectors) or None
        )

    async def get_deployment(self, namespace: str, name: str) -> Obj:
        """`kubectl get deployment NAME -n NS -o json`; "not found" when there is none."""
        path = apis("apps/v1", namespace, "deployments", name)
        return await self._get_object(path, "Deployment")

    async def list_hpas(self, namespace: str) -> list[Obj]:
        """`kubectl get hpa -n NS -o json` (autoscaling/v2) → the items."""
        path = apis("autoscaling/v2", namespace, "horizontalpodautoscalers")
        return await self._list(path, "HorizontalPodAutoscaler")

    async def list_prometheus_rules(
        self, namespace: str | None, label_selector: str | None = None
    ) -> list[Obj]:
        """`kubectl get prometheusrules.monitoring.coreos.com [-n NS | -A] [-l SEL] -o json`."""
        path = apis("monitoring.coreos.com/v1", namespace, "prometheusrules")
        return await self._list(path, "PrometheusRule", label_selector=label_selector)

    async def list_nodes(self, label_selector: str | None = None) -> list[Obj]:
        """`kubectl get nodes [-l SEL] -o json` → the items."""
        return await self._list(core(None, "nodes"), "Node", label_selector=label_selector)

    async def read_pod_log(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        previous: bool,
        tail_lines: int,
        limit_bytes: int,
    ) -> str:
        """`kubectl logs NAME -n NS -c C [--previous] --tail=N --limit-bytes=B` (text/plain).

        `GET /api/v1/namespaces/NS/pods/NAME/log?container=C&previous=…&tailLines=N&
        limitBytes=B`. At most `limit_bytes` bytes are kept even from a server that ignores
        limitBytes; undecodable bytes become U+FFFD. A missing previous instance is the
        server's 400 ("http 400", its message naming the container)."""
        params = {
            "container": container,
            "previous": previous,
            "tailLines": tail_lines,
            "limitBytes": limit_bytes,
        }
        body = await self._raw(
            "GET", core(namespace, "pods", name, "log"), params=params, accept="*/*"
        )
        return body[:limit_bytes].decode("utf-8", errors="replace")
