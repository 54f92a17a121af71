"""The ClusterRole of `oncall serve` grants exactly what the probes read and nothing that
writes: no verb other than get, list and watch (issue 30, acceptance 5).

What the probes read is not copied here by hand. The test finds every KubeReader method that
the probe modules (oncall/probes) call, by parsing their source; calls each one on a real
KubeReader against a recording HTTP server (aiohttp); and turns each request into what the
API server authorizes it as, by its RequestInfo rules (a GET of a collection is `list`, of
one object `get`, `watch=true` a `watch`; a third path part is a subresource: `pods/log`).
The role must allow each of those and grant nothing beyond them. Broken copies of the role (a
write verb, a wildcard, a missing subresource, secrets) show that each check can fail.
"""

from __future__ import annotations

import ast
import copy
import inspect
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from oncall.backends.kube import KubeReader
from oncall.settings.model import KubernetesSettings
from tests.deploy.manifests import ROOT, Obj, objects, one
from tests.harness.faults import kubeconfig_for

PROBES = ROOT / "oncall" / "probes"
READ_VERBS = frozenset({"get", "list", "watch"})
ROLE = "oncall-serve-reader"

#: One call of each request method of KubeReader, as a probe makes it. Every such method is
#: listed (a test checks), so a method added later must be listed before a probe may use it.
CALLS: dict[str, Callable[[KubeReader], Awaitable[object]]] = {
    "list_pods": lambda r: r.list_pods("ai", "app=vllm", "status.phase=Running"),
    "get_pod": lambda r: r.get_pod("ai", "vllm-0"),
    "list_events": lambda r: r.list_events(None, "Node", "gpu-node-1"),  # all namespaces
    "get_deployment": lambda r: r.get_deployment("ai", "vllm"),
    "list_prometheus_rules": lambda r: r.list_prometheus_rules(None, "role=alert-rules"),
    "list_nodes": lambda r: r.list_nodes("nvidia.com/gpu.present=true"),
    # scale-deployment's reads (the node-fit check, the HPA): the write path's, not a probe's.
    "list_all_pods": lambda r: r.list_all_pods(),
    "list_hpas": lambda r: r.list_hpas("ai"),
    "read_pod_log": lambda r: r.read_pod_log(
        "ai", "vllm-0", "vllm", previous=True, tail_lines=50, limit_bytes=4096
    ),
}
#: Methods of KubeReader that send no request of their own.
NOT_REQUESTS = frozenset({"open", "aclose"})


@dataclass(frozen=True, order=True)
class Access:
    """What one request asks the API server's authorizer for."""

    group: str  # "" for the core API
    resource: str  # with its subresource: "pods/log"
    verb: str

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}" + (f".{self.group}" if self.group else "")


def access_of(method: str, path_qs: str) -> Access:
    """The apiserver's RequestInfo for a resource request (k8s.io/apiserver
    pkg/endpoints/request/requestinfo.go), reduced to what RBAC matches on."""
    url = urlsplit(path_qs)
    parts = [unquote(p) for p in url.path.strip("/").split("/")]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    elif parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        raise AssertionError(f"not a resource request: {path_qs}")
    # `/namespaces/NS[/status|/finalize]` is the namespace itself; anything else below it is
    # a namespaced resource.
    if len(rest) > 2 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    resource, name, sub = rest[0], rest[1:2], rest[2:3]
    watch = parse_qs(url.query).get("watch", [""])[0] in ("true", "1")
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method == "GET":
        verb = "watch" if watch else ("get" if name else "list")
    else:
        verb = verbs.get(method, method.lower())
    return Access(group, "/".join([resource, *sub]), verb)


KINDS = {
    "pods": "Pod",
    "events": "Event",
    "deployments": "Deployment",
    "nodes": "Node",
    "prometheusrules": "PrometheusRule",
}
"""The kind of each resource the reader asks for (a new one fails here, by name)."""


def request_methods() -> set[str]:
    """KubeReader's public coroutine methods that send a request."""
    found = {
        name
        for name, member in inspect.getmembers(KubeReader)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }
    return found - NOT_REQUESTS


def methods_called_by_probes() -> set[str]:
    """The KubeReader request methods named in a call anywhere in oncall/probes."""
    known = request_methods()
    called: set[str] = set()
    for path in sorted(PROBES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in known
            ):
                called.add(node.func.attr)
    return called


async def accesses(methods: set[str], tmp_path: Path) -> set[Access]:
    """The accesses the requests of `methods` ask for, recorded from a real KubeReader."""
    seen: list[tuple[str, str]] = []

    async def answer(request: web.Request) -> web.StreamResponse:
        seen.append((request.method, request.path_qs))
        if request.path.endswith("/log"):
            return web.Response(text="log line\n")
        # The reader checks each answer's kind (as kubectl decodes by it): answer a get with
        # one object of the resource's kind and a list with its `KindList`.
        access = access_of(request.method, request.path_qs)
        kind = KINDS[access.resource]
        if access.verb == "get":
            name = request.path.rstrip("/").rsplit("/", 1)[-1]
            return web.json_response({"kind": kind, "metadata": {"name": name}})
        return web.json_response({"kind": f"{kind}List", "items": [], "metadata": {}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    async with TestServer(app, host="127.0.0.1") as server:
        config = kubeconfig_for(tmp_path / "kubeconfig", str(server.make_url("")).rstrip("/"))
        reader = await KubeReader.open(KubernetesSettings(kubeconfig=config, timeout=10))
        try:
            for name in sorted(methods):
                before = len(seen)
                await CALLS[name](reader)
                assert len(seen) > before, f"{name} sent no request"
        finally:
            await reader.aclose()
    return {access_of(method, path) for method, path in seen}


# -- the role, as RBAC reads it ---------------------------------------------------------------


def _rules(role: Obj) -> Iterator[dict[str, list[str]]]:
    yield from role.get("rules") or []


def allows(role: Obj, access: Access) -> bool:
    """RBAC's rule match (plugin/pkg/auth/authorizer/rbac/rbac.go): group, resource and verb
    each named or `*`; a rule with resourceNames never allows a list or a watch."""
    for rule in _rules(role):
        groups, resources, verbs = (rule.get(k) or [] for k in ("apiGroups", "resources", "verbs"))
        if rule.get("resourceNames") and access.verb in ("list", "watch"):
            continue
        if (
            (access.group in groups or "*" in groups)
            and (access.resource in resources or "*" in resources)
            and (access.verb in verbs or "*" in verbs)
        ):
            return True
    return False


def granted(role: Obj) -> set[Access]:
    """Every (group, resource, verb) the role's rules name, wildcards as written."""
    return {
        Access(group, resource, verb)
        for rule in _rules(role)
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
    }


def problems_of(role: Obj, used: set[Access]) -> list[str]:
    """Why `role` is not exactly the read-only role for `used`; empty when it is."""
    found: list[str] = []
    if role.get("aggregationRule"):
        found.append("an aggregationRule: other roles' rules join this one")
    for rule in _rules(role):
        if rule.get("nonResourceURLs"):
            found.append(f"nonResourceURLs {rule['nonResourceURLs']}")
        for key in ("apiGroups", "resources", "verbs"):
            if "*" in (rule.get(key) or []):
                found.append(f"a wildcard in {key}: {rule}")
    for grant in sorted(granted(role)):
        if grant.verb not in READ_VERBS:
            found.append(f"grants {grant}: not a read")
        elif grant not in used and "*" not in (grant.group, grant.resource, grant.verb):
            found.append(f"grants {grant}, which no probe reads")
    found.extend(f"misses {access}" for access in sorted(used) if not allows(role, access))
    return found


def shipped_role() -> Obj:
    return copy.deepcopy(one(objects(), "ClusterRole", ROLE))


# -- the tests --------------------------------------------------------------------------------


def test_every_request_method_of_the_reader_has_a_recorded_call() -> None:
    assert set(CALLS) == request_methods()
    called = methods_called_by_probes()
    # The probes' reads as of this writing: a new one shows up here and in the role's test.
    assert {"list_pods", "get_pod", "read_pod_log", "list_events"} <= called
    assert "list_prometheus_rules" not in called  # the rules loader's, not a probe's
    assert not {"list_all_pods", "list_hpas"} & called  # scale-deployment's only


def test_requests_map_to_the_access_the_apiserver_authorizes() -> None:
    core, apps = "/api/v1/namespaces/ai", "/apis/apps/v1/namespaces/ai"
    assert access_of("GET", f"{core}/pods?limit=500") == Access("", "pods", "list")
    assert access_of("GET", f"{core}/pods/vllm-0") == Access("", "pods", "get")
    assert access_of("GET", f"{core}/pods/vllm-0/log?previous=true") == Access(
        "", "pods/log", "get"
    )
    assert access_of("GET", "/api/v1/events?fieldSelector=x") == Access("", "events", "list")
    assert access_of("GET", f"{core}/pods?watch=true") == Access("", "pods", "watch")
    assert access_of("GET", f"{apps}/deployments/vllm") == Access("apps", "deployments", "get")
    assert access_of("PATCH", f"{apps}/deployments/vllm") == Access("apps", "deployments", "patch")
    assert access_of("POST", f"{core}/pods/vllm-0/eviction") == Access(
        "", "pods/eviction", "create"
    )
    assert access_of("GET", "/api/v1/namespaces/ai") == Access("", "namespaces", "get")


async def test_the_clusterrole_grants_exactly_what_the_probes_read(tmp_path: Path) -> None:
    used = await accesses(methods_called_by_probes(), tmp_path)
    assert Access("", "pods/log", "get") in used and Access("", "nodes", "list") in used
    assert problems_of(shipped_role(), used) == []
    assert {a.verb for a in used} <= READ_VERBS  # the reader itself only reads


def test_the_clusterrole_grants_no_verb_but_get_list_watch() -> None:
    role = shipped_role()
    verbs = {verb for rule in _rules(role) for verb in rule["verbs"]}
    assert verbs and verbs <= READ_VERBS
    assert not role.get("aggregationRule")
    assert all(not rule.get("nonResourceURLs") for rule in _rules(role))


def _add_rule(**rule: list[str]) -> Callable[[Obj], None]:
    return lambda role: role["rules"].append(rule)


def _drop_resource(resource: str) -> Callable[[Obj], None]:
    def change(role: Obj) -> None:
        role["rules"] = [r for r in role["rules"] if resource not in r["resources"]]

    return change


def _add_verb(verb: str) -> Callable[[Obj], None]:
    return lambda role: role["rules"][0]["verbs"].append(verb)


BROKEN = [
    pytest.param(_add_verb("patch"), "grants patch pods", id="a-write-verb"),
    pytest.param(_add_verb("delete"), "grants delete pods", id="delete"),
    pytest.param(_add_verb("*"), "a wildcard in verbs", id="any-verb"),
    pytest.param(
        _add_rule(apiGroups=["*"], resources=["*"], verbs=["get"]), "wildcard", id="any-resource"
    ),
    pytest.param(
        _add_rule(apiGroups=[""], resources=["secrets"], verbs=["get", "list"]),
        "grants get secrets, which no probe reads",
        id="secrets",
    ),
    pytest.param(
        _add_rule(apiGroups=[""], resources=["pods/exec"], verbs=["get"]),
        "grants get pods/exec",
        id="exec",
    ),
    pytest.param(
        _add_rule(
            apiGroups=["rbac.authorization.k8s.io"],
            verbs=["escalate", "bind"],
            resources=["clusterroles"],
        ),
        "grants bind clusterroles",
        id="escalate",
    ),
    pytest.param(
        _add_rule(nonResourceURLs=["/metrics"], verbs=["get"]), "nonResourceURLs", id="urls"
    ),
    pytest.param(_drop_resource("pods/log"), "misses get pods/log", id="no-logs"),
    pytest.param(_drop_resource("events"), "misses list events", id="no-events"),
]


@pytest.mark.parametrize(("change", "said"), BROKEN)
async def test_a_broken_copy_of_the_role_is_caught(
    tmp_path: Path, change: Callable[[Obj], None], said: str
) -> None:
    used = await accesses(methods_called_by_probes(), tmp_path)
    role = shipped_role()
    change(role)
    found = problems_of(role, used)
    assert any(said in problem for problem in found), found


def test_only_the_serve_account_holds_the_role_and_nothing_else_is_bound() -> None:
    objs = objects()
    binding = one(objs, "ClusterRoleBinding")
    account = one(objs, "ServiceAccount")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": ROLE,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "oncall"}
    ]
    kinds: list[Any] = [o["kind"] for o in objs]
    assert kinds.count("ClusterRole") == 1
    assert "Role" not in kinds and "RoleBinding" not in kinds
