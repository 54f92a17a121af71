"""The HTTP face of the simulator: an aiohttp application speaking the Kubernetes REST API.

Routes /api and /apis paths to the generic verbs (after bearer-token authentication and RBAC),
serves pod logs (`pods/NAME/log`, see `logs`), discovery and /version, streams watches, and
exposes drill-only endpoints under /drill/ (no authentication; loopback only) for fault injection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from oncall_drill.kube_sim import disruption, errors, identity, logs, resources, verbs
from oncall_drill.kube_sim.errors import ApiError
from oncall_drill.kube_sim.rbac import authorize
from oncall_drill.kube_sim.resources import ResourceType
from oncall_drill.kube_sim.selectors import make_filter
from oncall_drill.kube_sim.sim import KubeSim
from oncall_drill.kube_sim.store import Obj

log = logging.getLogger(__name__)

SELF_SUBJECT_REVIEWS = ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"]
SIM_KEY = web.AppKey("kube_sim", KubeSim)
WATCH_DEFAULT_TIMEOUT_S = 1800
VERSION_INFO = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.1-oncall-drill",
    "gitCommit": "0" * 40,
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass(frozen=True)
class Target:
    """What a resource path names."""

    rt: ResourceType
    namespace: str | None
    name: str
    subresource: str


def _reply(body: Any, status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


def _error(err: ApiError) -> web.Response:
    return _reply(err.status(), err.code)


def parse_target(segments: list[str]) -> tuple[str, str, Target | None]:
    """(group, version, target) for /api/v1/... or /apis/<group>/<version>/...; target None for
    the group version itself. Raises 404 for paths the simulator does not serve."""
    if segments[0] == "api" and len(segments) >= 2:
        group, version, rest = "", segments[1], segments[2:]
    elif segments[0] == "apis" and len(segments) >= 3:
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        raise errors.path_not_found()
    if not rest:
        return group, version, None
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise errors.path_not_found()
    rt = resources.lookup(group, version, rest[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise errors.path_not_found()
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if rt.namespaced and namespace is None and name:
        raise errors.path_not_found()
    if sub and not (
        (sub == "status" and rt.kind in ("Pod", "Deployment", "Node"))
        or (sub in ("log", "eviction") and rt.kind == "Pod")
    ):
        raise errors.path_not_found()
    return group, version, Target(rt, namespace, name, sub)


def _verb(method: str, target: Target, watch: bool) -> str:
    if method == "GET":
        if target.name:
            return "get"
        return "watch" if watch else "list"
    named = {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method == "POST" and not target.name:
        return "create"
    if method in named and target.name:
        return named[method]
    if method == "DELETE":
        return "deletecollection"
    raise errors.method_not_allowed()


async def _json_body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise errors.bad_request(f"error decoding body: {exc}") from exc


async def handle_api(request: web.Request) -> web.StreamResponse:
    try:
        return await _handle_api(request)
    except ApiError as err:
        return _error(err)


async def _handle_api(request: web.Request) -> web.StreamResponse:
    sim = request.app[SIM_KEY]
    segments = [s for s in request.path.split("/") if s]
    if not segments or segments[0] not in ("api", "apis"):
        raise errors.path_not_found()
    user = sim.users.authenticate(request.headers.get("Authorization"))
    if segments == ["api"]:
        return _reply(resources.api_versions(request.host))
    if segments == ["apis"]:
        return _reply(resources.api_group_list())
    if segments == SELF_SUBJECT_REVIEWS:
        if request.method != "POST":
            raise errors.method_not_allowed()
        return _reply(identity.self_subject_review(user, await _json_body(request)), 201)
    group, version, target = parse_target(segments)
    if target is None:
        listing = resources.api_resource_list(group, version)
        if listing is None or request.method != "GET":
            raise errors.path_not_found()
        return _reply(listing)
    query = request.query
    if target.subresource == "eviction":
        if request.method != "POST":
            raise errors.method_not_allowed()
        authorize(user, "create", target.rt, target.namespace, target.name)
        dry_run = verbs.parse_dry_run(query.getall("dryRun", []))
        evicted = disruption.evict(
            sim, target.namespace or "", target.name, await _json_body(request), dry_run=dry_run
        )
        return _reply(evicted, 201)
    watch = query.get("watch", "") in ("true", "1")
    verb = _verb(request.method, target, watch)
    rt, ns, name = target.rt, target.namespace, target.name
    authorize(user, verb, rt, ns, name)
    if not rt.allows("list" if verb == "watch" else verb):
        raise errors.method_not_allowed()
    if target.subresource and verb != "get":
        raise errors.method_not_allowed()
    if target.subresource == "log":
        pod = sim.store.get(rt, ns, name)
        body = logs.pod_log(pod, name, request.query, _log_source(sim))
        return web.Response(body=body, content_type="text/plain", charset="utf-8")
    dry_run = verbs.parse_dry_run(query.getall("dryRun", []))
    flat = {k: query[k] for k in query}
    if verb == "get":
        return _reply(_with_status(sim, rt, verbs.get(sim, rt, ns, name)))
    if verb == "list":
        listing = verbs.list_(sim, rt, ns, flat)
        listing["items"] = [_with_status(sim, rt, item) for item in listing.get("items") or []]
        return _reply(listing)
    if verb == "watch":
        return await _watch(request, sim, rt, ns, flat)
    if verb == "create":
        return _reply(verbs.create(sim, rt, ns, await _json_body(request), dry_run=dry_run), 201)
    if verb == "update":
        return _reply(verbs.update(sim, rt, ns, name, await _json_body(request), dry_run=dry_run))
    if verb == "patch":
        content_type = request.headers.get("Content-Type", "")
        return _reply(
            verbs.patch_(
                sim,
                rt,
                ns,
                name,
                raw=await request.read(),
                content_type=content_type,
                dry_run=dry_run,
            )
        )
    body = await _json_body(request)
    return _reply(verbs.delete(sim, rt, ns, name, body=body, query=flat, dry_run=dry_run))


def _with_status(sim: KubeSim, rt: ResourceType, obj: Obj) -> Obj:
    # A budget's status is the disruption controller's: computed from the pods as they are now.
    return disruption.with_status(sim, obj) if rt is resources.PDBS else obj


def _log_source(sim: KubeSim) -> logs.ContainerLogs | None:
    """The pod hook, when it keeps what its processes printed."""
    hook = sim.controller.kubelet.hook
    return hook if isinstance(hook, logs.ContainerLogs) else None


async def _watch(
    request: web.Request, sim: KubeSim, rt: ResourceType, ns: str | None, query: dict[str, str]
) -> web.StreamResponse:
    """Stream watch events (one JSON object per line) until timeoutSeconds or disconnect."""
    keep = make_filter(
        query.get("labelSelector"),
        query.get("fieldSelector"),
        resources.allowed_field_selectors(rt),
    )
    queue: asyncio.Queue[tuple[str, Obj]] = asyncio.Queue()

    def listener(event: str, changed: ResourceType, obj: Obj) -> None:
        if changed is rt and (ns is None or (obj.get("metadata") or {}).get("namespace") == ns):
            queue.put_nowait((event, json.loads(json.dumps(obj))))

    if query.get("resourceVersion", "0") in ("", "0"):
        for obj in sim.store.list(rt, ns):
            queue.put_nowait(("ADDED", obj))
    sim.store.add_listener(listener)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(query.get("timeoutSeconds") or WATCH_DEFAULT_TIMEOUT_S)
    try:
        while (left := deadline - loop.time()) > 0:
            try:
                async with asyncio.timeout(left):
                    event, obj = await queue.get()
            except TimeoutError:
                break
            if keep(obj):
                line = json.dumps({"type": event, "object": obj}) + "\n"
                await response.write(line.encode())
    except ConnectionResetError:
        pass  # the client went away
    finally:
        sim.store.remove_listener(listener)
    return response


async def handle_version(request: web.Request) -> web.Response:
    return _reply(VERSION_INFO)


async def handle_health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _drill_json(request: web.Request) -> dict[str, Any]:
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise errors.bad_request("expected a JSON object")
    return body


def _drill(fn: Any) -> Any:
    async def handler(request: web.Request) -> web.Response:
        try:
            return _reply(fn(request.app[SIM_KEY], await _drill_json(request)))
        except ApiError as err:
            return _error(err)
        except (KeyError, TypeError, ValueError) as exc:
            return _error(errors.bad_request(f"bad drill request: {exc!r}"))

    return handler


def _oom_kill(sim: KubeSim, body: dict[str, Any]) -> Obj:
    return sim.oom_kill(str(body.get("namespace", "ai")), str(body["pod"]), body.get("container"))


def _container_exit(sim: KubeSim, body: dict[str, Any]) -> Obj:
    return sim.container_exited(
        str(body.get("namespace", "ai")),
        str(body["pod"]),
        body.get("container"),
        reason=str(body.get("reason", "Error")),
        exit_code=int(body.get("exitCode", 1)),
    )


def _node_condition(sim: KubeSim, body: dict[str, Any]) -> Obj:
    status = body["status"]
    if isinstance(status, str):
        status = status.lower() == "true"
    return sim.set_node_condition(
        str(body["node"]),
        str(body["type"]),
        bool(status),
        reason=str(body.get("reason", "")),
        message=str(body.get("message", "")),
    )


async def _on_startup(app: web.Application) -> None:
    await app[SIM_KEY].start()


async def _on_cleanup(app: web.Application) -> None:
    await app[SIM_KEY].stop()


def create_app(sim: KubeSim, routes: Iterable[web.RouteDef] = ()) -> web.Application:
    """The aiohttp application serving sim; starting the app starts its controllers.

    `routes`: more drill-only routes (the cluster's), matched before the API's catch-all."""
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app[SIM_KEY] = sim
    app.router.add_get("/version", handle_version)
    app.router.add_get("/version/", handle_version)  # the Python client's path
    for path in ("/healthz", "/readyz", "/livez"):
        app.router.add_get(path, handle_health)
    app.router.add_post("/drill/oom-kill", _drill(_oom_kill))
    app.router.add_post("/drill/container-exit", _drill(_container_exit))
    app.router.add_post("/drill/node-condition", _drill(_node_condition))
    app.router.add_routes(list(routes))
    app.router.add_route("*", "/{tail:.*}", handle_api)
    app.on_startup.append(_on_startup)
    app.on_cleanup.append(_on_cleanup)
    return app
