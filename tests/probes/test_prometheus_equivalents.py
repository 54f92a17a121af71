"""The curl equivalents of the Prometheus probes carry the headers oncall sends — as shell
variables, never their secret values — and survive hostile header names."""

from __future__ import annotations

import shlex

from oncall.probes.context import ProbeContext
from oncall.probes.gpu import DevicesParams, devices_equivalent
from oncall.probes.prometheus import QueryParams, query_equivalent
from oncall.probes.vllm_rates import RatesParams, rates_equivalent
from oncall.settings import Settings

SECRET, TENANT = "s3cr3t-token-value", "tenant-7f3a"


def settings(headers: dict[str, str], token: str | None = SECRET) -> Settings:
    prometheus: dict[str, object] = {"url": "http://127.0.0.1:9090/prometheus/", "headers": headers}
    if token is not None:
        prometheus["bearer_token"] = token
    return Settings.model_validate({"prometheus": prometheus})


def test_every_prometheus_equivalent_names_the_headers_not_their_values() -> None:
    ctx = ProbeContext(settings({"X-Scope-OrgID": TENANT}))
    texts = [
        query_equivalent(ctx, QueryParams(query="up")),
        rates_equivalent(ctx, RatesParams()),
        devices_equivalent(ctx, DevicesParams(source="dcgm")),
    ]
    for text in texts:
        for line in text.splitlines():
            argv = shlex.split(line)  # a command a shell reads as it is printed
            assert argv[:2] == ["curl", "-s"]
            assert "http://127.0.0.1:9090/prometheus/api/v1/query" in argv
            assert "Authorization: Bearer $PROMETHEUS_TOKEN" in line
            assert "'X-Scope-OrgID: '\"$PROMETHEUS_HEADER_X_SCOPE_ORGID\"" in line
        assert SECRET not in text and TENANT not in text


def test_without_a_token_or_headers_the_command_is_plain() -> None:
    text = query_equivalent(ProbeContext(settings({}, token=None)), QueryParams(query="up"))
    assert text == (
        "curl -s http://127.0.0.1:9090/prometheus/api/v1/query --data-urlencode query=up"
    )


def test_a_header_name_with_shell_characters_is_quoted() -> None:
    """RFC 9110 allows `$` and a backquote in a header name: quoted apart from the variable,
    the name cannot run a command or expand a variable in the reader's shell."""
    ctx = ProbeContext(settings({"X-$HOME`id`": "v"}, token=None))
    line = query_equivalent(ctx, QueryParams(query="up"))
    argv = shlex.split(line)
    assert argv[2:4] == ["-H", "X-$HOME`id`: $PROMETHEUS_HEADER_X__HOME_ID_"]
    assert line.count("'X-$HOME`id`: '") == 1  # single quotes: no expansion, no command
