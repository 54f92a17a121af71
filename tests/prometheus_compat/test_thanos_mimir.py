"""oncall against Thanos Query and Mimir: a path prefix, a tenant header, their extra fields.

The server is the loopback stand-in of conftest.py (the real ones cannot run here), serving
the recorded payloads of fixtures/thanos and fixtures/mimir; the client, the engine and the
`oncall alerts` command are the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError
from tests.cli_runner import Result, run_oncall
from tests.prometheus_compat.conftest import (
    FIXTURES,
    MIMIR,
    TENANT,
    TENANT_HEADER,
    THANOS,
    CompatServer,
    Flavour,
)

Serve = Callable[[Flavour], CompatServer]
#: A local rule, evaluated by oncall with an instant query through the same server.
LOCAL_RULE = (
    "groups:\n- name: local\n  rules:\n  - alert: QueueDeep\n"
    '    expr: label_replace(vector(42), "pod", "vllm-0", "", "") > 10\n'
    "    labels: {severity: page}\n"
)


def _recorded_states(path: Path) -> dict[str, str]:
    """Each alerting rule's state as the payload says (rules of one name taken together)."""
    order = ("inactive", "pending", "firing")
    states: dict[str, str] = {}
    for group in json.loads(path.read_bytes())["data"]["groups"]:
        for rule in group["rules"]:
            here = rule["state"]
            if rule["name"] not in states or order.index(here) > order.index(states[rule["name"]]):
                states[rule["name"]] = here
    return states


def _alerts(
    tmp_path: Path,
    url: str,
    *args: str,
    headers: dict[str, str] | None = None,
    local: bool = True,
) -> Result:
    """`oncall alerts ARGS` with no pack, the local rule file unless not `local`, and every
    rule of the server (`alerts.from_prometheus` defaults to all)."""
    (tmp_path / "local.yaml").write_text(LOCAL_RULE)
    prometheus: dict[str, Any] = {"url": url, "timeout": "5s"}
    if headers is not None:
        prometheus["headers"] = headers
    files = [str(tmp_path / "local.yaml")] if local else []
    config = tmp_path / "oncall.yaml"
    config.write_text(
        json.dumps({"prometheus": prometheus, "alerts": {"packs": [], "files": files}})
    )
    return run_oncall("alerts", *args, "--config", str(config), cwd=tmp_path)


async def test_client_joins_every_path_below_the_prefix_and_sends_the_headers(
    serve_compat: Serve,
) -> None:
    mimir = serve_compat(MIMIR)
    async with PrometheusClient(mimir.url, timeout=5, headers={TENANT_HEADER: TENANT}) as prom:
        groups = await prom.rules(kind="alert")
        samples = await prom.query("vector(42)")
        series = await prom.query_range("vector(42)", start=0, end=60, step=30)
    assert [g["file"] for g in groups] == ["llm-alerts", "llm-alerts"]  # the namespace
    assert [s.value for s in samples] == [42.0]
    assert [[v for _, v in s.points] for s in series] == [[42.0, 42.0, 42.0]]
    assert [r.path for r in mimir.requests] == [
        "/prometheus/api/v1/rules",
        "/prometheus/api/v1/query",
        "/prometheus/api/v1/query_range",
    ]
    assert mimir.requests[0].params["type"] == ["alert"]
    assert all(r.headers["x-scope-orgid"] == TENANT for r in mimir.requests)


async def test_a_url_without_mimirs_prefix_is_a_clear_404(serve_compat: Serve) -> None:
    mimir = serve_compat(MIMIR)
    root = mimir.url.removesuffix("/prometheus")
    async with PrometheusClient(root, timeout=5, headers={TENANT_HEADER: TENANT}) as prom:
        with pytest.raises(BackendError) as caught:
            await prom.rules(kind="alert")
    assert caught.value.reason == "http 404"
    assert "404 page not found" in caught.value.detail


def test_oncall_alerts_against_mimir_lists_its_rules_with_their_states(
    serve_compat: Serve, tmp_path: Path
) -> None:
    mimir = serve_compat(MIMIR)
    result = _alerts(tmp_path, mimir.url, "-o", "json", headers={TENANT_HEADER: TENANT})
    assert result.code == 1, result.stderr  # PodsHot fires
    body = json.loads(result.stdout)
    states = {a["name"]: a["state"] for a in body["alerts"]}
    assert states == {"QueueDeep": "firing", **_recorded_states(MIMIR_RULES)}
    sources = {a["name"]: a["source"] for a in body["alerts"]}
    assert sources.pop("QueueDeep") == "local" and set(sources.values()) == {"prometheus"}
    # Every request (rules, the local rule's query, and the rule liveness round's targets
    # and queries: issue 28) below the prefix, with the tenant.
    assert {r.path for r in mimir.requests} == {
        "/prometheus/api/v1/rules", "/prometheus/api/v1/query", "/prometheus/api/v1/targets",
    }  # fmt: skip
    assert all(r.headers.get("x-scope-orgid") == TENANT for r in mimir.requests)
    # The tenant is a header value, so a secret: on no output.
    assert TENANT not in result.stdout + result.stderr
    assert body["warnings"] == []


def test_without_the_tenant_header_mimir_refuses_and_every_state_is_unknown(
    serve_compat: Serve, tmp_path: Path
) -> None:
    mimir = serve_compat(MIMIR)
    result = _alerts(tmp_path, mimir.url)
    assert result.code == 3, result.stdout + result.stderr  # no state known: not "all well"
    row = next(line for line in result.stdout.splitlines() if line.startswith("QueueDeep"))
    assert "UNKNOWN" in row and "no org id" in row
    as_json = json.loads(_alerts(tmp_path, mimir.url, "-o", "json").stdout)["alerts"]
    assert [(a["name"], a["state"]) for a in as_json] == [("QueueDeep", "unknown")]
    assert "http 401 Unauthorized: no org id" in as_json[0]["error"]
    assert all(r.headers.get("x-scope-orgid") is None for r in mimir.requests)
    # No local rule to mark unknown: the failed rules request alone says the list is not known.
    alone = _alerts(tmp_path, mimir.url, "-o", "json", local=False)
    assert alone.code == 3
    assert "auth (http 401 Unauthorized: no org id)" in json.loads(alone.stdout)["error"]
    assert "no alerting rules known" in alone.stderr and "no org id" in alone.stderr


def test_a_tenant_mimir_has_no_rules_for_looks_like_one_without_rules(
    serve_compat: Serve, tmp_path: Path
) -> None:
    """Mimir does not know tenants in advance: a wrong tenant is answered with success, no
    rule groups and empty results. oncall cannot tell it from a tenant without rules: the
    Prometheus rules vanish from the list and the local rule evaluates to nothing."""
    mimir = serve_compat(MIMIR)
    result = _alerts(tmp_path, mimir.url, "-o", "json", headers={TENANT_HEADER: "someone-else"})
    assert result.code == 0, result.stderr
    alerts = json.loads(result.stdout)["alerts"]
    assert [(a["name"], a["state"]) for a in alerts] == [("QueueDeep", "inactive")]
    assert {r.headers["x-scope-orgid"] for r in mimir.requests} == {"someone-else"}


def test_thanos_partial_answer_is_used_and_its_warning_shown_as_a_note(
    serve_compat: Serve, tmp_path: Path
) -> None:
    thanos = serve_compat(THANOS)
    warnings = json.loads((THANOS_RULES).read_bytes())["warnings"]
    table = _alerts(tmp_path, thanos.url)
    assert table.code == 1, table.stderr  # the states it sent are used: PodsHot fires
    notes = [line for line in table.stdout.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: prometheus warns: {warnings[0]}"]
    body = json.loads(_alerts(tmp_path, thanos.url, "-o", "json").stdout)
    assert body["warnings"] == warnings
    alerts = {a["name"]: a for a in body["alerts"]}
    assert {n: a["state"] for n, a in alerts.items()} == {
        "QueueDeep": "firing", **_recorded_states(THANOS_RULES),
    }  # fmt: skip
    # Thanos adds the store's external labels to each rule (the replica label deduplicated).
    assert alerts["PodsHot"]["labels"] == {"cluster": "eu-1", "severity": "warning", "team": "llm"}
    # The rules, the local rule's query, and the rule liveness round (docs/on-call.md).
    assert {r.path.removeprefix("/thanos") for r in thanos.requests} == {
        "/api/v1/rules", "/api/v1/query", "/api/v1/targets",
    }  # fmt: skip


@pytest.mark.parametrize("flavour", [MIMIR, THANOS], ids=["mimir", "thanos"])
def test_a_failed_evaluation_shows_its_error_whatever_serves_it(
    flavour: Flavour, serve_compat: Serve, tmp_path: Path
) -> None:
    server = serve_compat(flavour)
    body = json.loads(
        _alerts(tmp_path, server.url, "-o", "json", headers={TENANT_HEADER: TENANT}).stdout
    )
    broken = next(a for a in body["alerts"] if a["name"] == "BrokenJoin")
    assert broken["state"] == "inactive" and broken["health"] == "err"
    assert broken["last_error"].endswith("many-to-many matching not allowed: matching labels "
                                         "must be unique on one side")  # fmt: skip
    assert broken["error"] == f"evaluation failed: {broken['last_error']}"
    hot = next(a for a in body["alerts"] if a["name"] == "PodsHot")
    assert hot["health"] == "ok" and hot["last_error"] is None and hot["error"] is None


MIMIR_RULES = FIXTURES / "mimir" / "rules_v1_alert.json"
THANOS_RULES = FIXTURES / "thanos" / "rules_v1_alert_partial.json"
