"""oncall's Kubernetes client against the drill's HTTPS API: what each answer becomes (401, 403,
404, 409, 429, 500, an HTML page), paged lists (`limit` + `continue`, 410 Expired, the bound),
selectors sent to the server, and a parity check with the official client (dev extra): the same
calls end in the same outcome class through both."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from oncall.backends import kube
from oncall.backends.kube_write import KubeWriter
from oncall.errors import BackendError
from oncall.settings.model import KubernetesSettings
from oncall_drill.kube_sim import READ_ONLY_CONTEXT
from tests.drill.kube.conftest import BUDGET_CAUSE, CANNED, NS, TOO_MANY, Https, write_config


def _settings(path: Path, context: str | None = None) -> KubernetesSettings:
    return KubernetesSettings(kubeconfig=path, context=context, namespace=NS, timeout=5.0)


@pytest.fixture
async def writer(https: Https, tmp_path: Path) -> AsyncIterator[KubeWriter]:
    made = await KubeWriter.open(_settings(write_config(tmp_path / "kc", https.config())))
    try:
        yield made
    finally:
        await made.aclose()


async def _fails(call: Any) -> BackendError:
    with pytest.raises(BackendError) as caught:
        await call
    return caught.value


# -- answers -----------------------------------------------------------------------------------


async def test_not_found_and_conflict(writer: KubeWriter) -> None:
    missing = await _fails(writer.get_pod(NS, "no-such-pod"))
    assert (missing.reason, missing.http_status) == ("not found", 404)
    assert 'pods "no-such-pod" not found' in missing.detail
    pod = (await writer.list_pods(NS, "app=vllm"))[0]["metadata"]["name"]
    stale = await _fails(writer.delete_pod(NS, pod, uid="not-its-uid", dry_run=True))
    assert (stale.reason, stale.http_status) == ("conflict", 409)
    assert "the UID in the precondition (not-its-uid) does not match" in stale.detail


async def test_a_read_only_user_is_forbidden_to_write(https: Https, tmp_path: Path) -> None:
    path = write_config(tmp_path / "kc", https.config())
    ro = await KubeWriter.open(_settings(path, READ_ONLY_CONTEXT))
    try:
        pod = (await ro.list_pods(NS, "app=vllm"))[0]["metadata"]
        error = await _fails(ro.delete_pod(NS, pod["name"], uid=pod["uid"], dry_run=True))
    finally:
        await ro.aclose()
    assert (error.reason, error.http_status) == ("forbidden", 403)
    assert 'cannot delete resource "pods" in namespace "ai"' in error.detail


async def test_an_eviction_refused_by_a_budget_says_why(writer: KubeWriter) -> None:
    error = await _fails(writer.evict_pod(CANNED + "429", "vllm-0", uid="u", dry_run=False))
    assert (error.reason, error.http_status) == ("disruption budget", 429)
    assert error.detail == f"{TOO_MANY} {BUDGET_CAUSE}"


@pytest.mark.parametrize(
    ("namespace", "reason", "status", "says"),
    [
        ("500", "http 500", 500, "Internal error occurred: etcd timeout"),
        ("html", "bad payload", None, "not JSON: '<html><body>Sign in"),
        ("html-502", "http 502", 502, "<html>Bad Gateway</html>"),
    ],
)
async def test_server_errors_and_html_pages(
    writer: KubeWriter, namespace: str, reason: str, status: int | None, says: str
) -> None:
    error = await _fails(writer.list_pods(CANNED + namespace))
    assert (error.reason, error.http_status) == (reason, status)
    assert says in error.detail


# -- lists -------------------------------------------------------------------------------------


async def test_lists_page_with_the_servers_continue_tokens(
    writer: KubeWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = await writer.list_pods(NS, "app=vllm")
    asked: list[dict[str, Any]] = []
    send = writer._http.send

    async def recording(method: str, path: str, **kwargs: Any) -> Any:
        asked.append(dict(kwargs.get("params") or {}))
        return await send(method, path, **kwargs)

    monkeypatch.setattr(writer._http, "send", recording)
    monkeypatch.setattr(kube, "LIST_PAGE", 1)
    paged = await writer.list_pods(NS, "app=vllm")
    assert [p["metadata"]["uid"] for p in paged] == [p["metadata"]["uid"] for p in whole]
    assert len(asked) == len(whole) >= 2  # one pod a page; the last page has no token
    assert asked[0]["labelSelector"] == "app=vllm" and asked[0]["limit"] == 1
    assert asked[0].get("continue") is None and all(a["continue"] for a in asked[1:])


async def test_selectors_and_the_page_size_go_to_the_server(
    https: Https, writer: KubeWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube, "LIST_MAX_PAGES", 4)
    before = len(https.seen)
    error = await _fails(
        writer.list_pods(CANNED + "endless", "app=vllm", field_selector="status.phase=Running")
    )
    asked = https.seen[before:]
    assert error.reason == "too large" and "narrow the selector" in error.detail
    assert len(asked) == 5  # bounded: the pages allowed, and one more that proves the excess
    assert {(a["labelSelector"], a["fieldSelector"], a["limit"]) for a in asked} == {
        ("app=vllm", "status.phase=Running", "500")
    }


async def test_an_expired_continue_token_lists_again_from_the_start(
    https: Https, writer: KubeWriter
) -> None:
    before = len(https.seen)
    pods = await writer.list_pods(CANNED + "expiring")
    assert [p["metadata"]["name"] for p in pods] == ["a", "b"]
    assert [a.get("continue") for a in https.seen[before:]] == [None, "t1", None]


# -- parity with the official client -------------------------------------------------------------


def _official(path: Path, context: str | None, call: str) -> str:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import MaxRetryError, SSLError

    try:
        api = config.new_client_from_config(config_file=str(path), context=context)
    except Exception:
        return "config"
    api.configuration.retries = False
    core: Any = client.CoreV1Api(api)  # its models type every field as optional
    try:
        if call == "list":
            pods = core.list_namespaced_pod(NS, label_selector="app=vllm").items
            return "ok " + ",".join(sorted(p.metadata.name for p in pods))
        if call == "get-missing":
            core.read_namespaced_pod("no-such-pod", NS)
        if call == "delete-stale":
            first = core.list_namespaced_pod(NS, label_selector="app=vllm").items[0]
            body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="stale"))
            core.delete_namespaced_pod(first.metadata.name, NS, body=body, dry_run="All")
        return "ok"
    except ApiException as exc:
        return "tls" if not exc.status else str(exc.status)
    except (SSLError, MaxRetryError):
        return "tls"
    finally:
        api.close()


async def _ours(path: Path, context: str | None, call: str) -> str:
    try:
        writer = await KubeWriter.open(_settings(path, context))
    except BackendError:
        return "config"
    try:
        if call == "list":
            pods = await writer.list_pods(NS, "app=vllm")
            return "ok " + ",".join(sorted(p["metadata"]["name"] for p in pods))
        if call == "get-missing":
            await writer.get_pod(NS, "no-such-pod")
        if call == "delete-stale":
            first = (await writer.list_pods(NS, "app=vllm"))[0]["metadata"]["name"]
            await writer.delete_pod(NS, first, uid="stale", dry_run=True)
        return "ok"
    except BackendError as exc:
        return "tls" if exc.reason == "tls" else str(exc.http_status or exc.reason)
    finally:
        await writer.aclose()


def _wrong_ca(doc: dict[str, Any]) -> None:
    import base64

    import trustme

    pem = trustme.CA().cert_pem.bytes()
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(pem).decode()


def _bad_token(doc: dict[str, Any]) -> None:
    doc["users"][0]["user"]["token"] = "wrong"


def _no_context(doc: dict[str, Any]) -> None:
    doc["current-context"] = "nowhere"


CASES: list[tuple[str, Callable[[dict[str, Any]], None] | None, str | None, str, str]] = [
    ("list", None, None, "list", "ok vllm-"),
    ("missing pod", None, None, "get-missing", "404"),
    ("stale uid", None, None, "delete-stale", "409"),
    ("read-only delete", None, READ_ONLY_CONTEXT, "delete-stale", "403"),
    ("bad token", _bad_token, None, "list", "401"),
    ("wrong CA", _wrong_ca, None, "list", "tls"),
    ("no such context", _no_context, None, "list", "config"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
async def test_parity_with_the_official_client(
    https: Https, tmp_path: Path, case: tuple[Any, ...]
) -> None:
    _, edit, context, call, expected = case
    doc = https.config()
    if edit is not None:
        edit(doc)
    path = write_config(tmp_path / "kubeconfig", doc)
    ours = await _ours(path, context, call)
    official = _official(path, context, call)
    assert ours == official
    assert ours.startswith(expected)
