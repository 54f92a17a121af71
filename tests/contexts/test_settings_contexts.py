"""`contexts:` in oncall.yaml: inheritance per section, selection, provenance, located errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oncall.errors import ConfigError, Problem, UsageError
from oncall.redaction import redact
from oncall.settings import FlagValue, load_settings
from oncall.settings.kubeconfig import kube_target
from oncall.settings.model import per_context
from tests.cli_runner import run_oncall

KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: kind-eu
clusters:
  - name: eu
    cluster: {server: "https://127.0.0.1:6443"}
  - name: us
    cluster: {server: "https://127.0.0.1:7443"}
contexts:
  - name: kind-eu
    context: {cluster: eu, user: me}
  - name: kind-us
    context: {cluster: us, user: me}
users:
  - name: me
    user: {}
"""

SETTINGS = """\
prometheus:
  url: http://127.0.0.1:9090
  timeout: 7s
redis:
  url: redis://127.0.0.1:6379/0
kubernetes:
  kubeconfig: {kubeconfig}
  namespace: inference
contexts:
  eu:
    prometheus:
      url: http://127.0.0.1:19090
    kubernetes:
      context: kind-eu
  us:
    production: true
    redis:
      url: redis://:s3cret-us@127.0.0.1:16379/0
    kubernetes:
      context: kind-us
"""


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    (tmp_path / "oncall.yaml").write_text(SETTINGS.format(kubeconfig=tmp_path / "kubeconfig"))
    return tmp_path


def test_a_context_inherits_what_it_does_not_set_section_by_section(config_dir: Path) -> None:
    settings = load_settings(cwd=config_dir, environ={}).settings
    assert settings.context_names() == ["eu", "us"]
    assert settings.selected_context is None
    eu = settings.for_context("eu")
    assert (eu.prometheus.url, eu.prometheus.timeout) == ("http://127.0.0.1:19090", 7.0)
    assert (eu.kubernetes.context, eu.kubernetes.namespace) == ("kind-eu", "inference")
    assert eu.redis.url == "redis://127.0.0.1:6379/0"
    assert (eu.context.name, eu.context.production) == ("eu", False)
    us = settings.for_context("us")
    assert us.prometheus.url == "http://127.0.0.1:9090"
    assert us.redis.url.endswith("@127.0.0.1:16379/0")
    assert (us.context.name, us.context.production, us.selected_context) == ("us", True, "us")


def test_alertmanager_is_per_context_and_inherited(config_dir: Path) -> None:
    """Issue 18 with issue 14's section: a context sets its own Alertmanager or inherits the
    top-level one (timeout and token included); a context never asks another's."""
    path = config_dir / "oncall.yaml"
    text = (
        path.read_text()
        .replace(
            "redis:\n  url: redis://127.0.0.1:6379/0\n",
            "redis:\n  url: redis://127.0.0.1:6379/0\n"
            "alertmanager:\n  url: http://127.0.0.1:9093\n  timeout: 4s\n",
            1,
        )
        .replace(
            "    kubernetes:\n      context: kind-us\n",
            "    kubernetes:\n      context: kind-us\n    alertmanager:\n      url: http://127.0.0.1:19093\n",
        )
    )
    path.write_text(text)
    settings = load_settings(cwd=config_dir, environ={}).settings
    assert "alertmanager" in per_context()
    eu, us = settings.for_context("eu"), settings.for_context("us")
    assert (eu.alertmanager.url, eu.alertmanager.timeout) == ("http://127.0.0.1:9093", 4.0)
    assert (us.alertmanager.url, us.alertmanager.timeout) == ("http://127.0.0.1:19093", 4.0)


def test_every_per_context_section_the_settings_have_is_in_an_entry(config_dir: Path) -> None:
    entry = load_settings(cwd=config_dir, environ={}).settings.contexts["eu"]
    assert {"prometheus", "kubernetes", "redis", "vllm", "gpu", "degradation"} <= set(per_context())
    for section in per_context():
        assert getattr(entry, section) is not None


def test_context_flag_wins_over_the_environment(config_dir: Path) -> None:
    environ = {"ONCALL_CONTEXT": "us"}
    assert load_settings(cwd=config_dir, environ=environ).settings.context.name == "us"
    chosen = load_settings(cwd=config_dir, environ=environ, context="eu").settings
    assert chosen.prometheus.url == "http://127.0.0.1:19090"


def test_an_unknown_context_names_the_known_ones(config_dir: Path) -> None:
    with pytest.raises(UsageError, match=r"no context 'asia'.*eu, us"):
        load_settings(cwd=config_dir, environ={}, context="asia")


def test_without_contexts_only_the_one_context_name_is_known(tmp_path: Path) -> None:
    assert load_settings(cwd=tmp_path, environ={}, context="default").settings.contexts == {}
    with pytest.raises(UsageError, match="the contexts are: default"):
        load_settings(cwd=tmp_path, environ={}, context="eu")


def test_sources_say_which_values_the_context_set_itself(config_dir: Path) -> None:
    environ = {"ONCALL_PROMETHEUS__TIMEOUT": "9s"}
    loaded = load_settings(cwd=config_dir, environ=environ, context="eu")
    assert loaded.sources["prometheus.url"] == "oncall.yaml:12 (context eu)"
    assert loaded.sources["kubernetes.context"] == "oncall.yaml:14 (context eu)"
    assert loaded.sources["prometheus.timeout"] == "env ONCALL_PROMETHEUS__TIMEOUT"
    assert loaded.settings.prometheus.timeout == 9.0  # inherited from the top level's source
    assert loaded.sources["kubernetes.namespace"] == "oncall.yaml:8"
    assert loaded.sources["context.name"] == "flag --context"
    assert not any(key.startswith("contexts.") for key in loaded.sources)


def test_a_context_flag_override_names_the_context_key(config_dir: Path) -> None:
    where = "--set contexts.us.redis.timeout"
    flag = FlagValue(("contexts", "us", "redis", "timeout"), "1s", where)
    loaded = load_settings(cwd=config_dir, environ={}, flags=[flag], context="us")
    assert loaded.settings.redis.timeout == 1.0
    assert loaded.sources["redis.timeout"] == "flag --set contexts.us.redis.timeout (context us)"


def problems_with(config_dir: Path, old: str, new: str) -> list[Problem]:
    """The problems of SETTINGS with `old` replaced by `new`."""
    text = SETTINGS.format(kubeconfig=config_dir / "kubeconfig").replace(old, new)
    (config_dir / "oncall.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd=config_dir, environ={})
    return caught.value.problems


def test_a_bad_value_in_a_context_is_located_once(config_dir: Path) -> None:
    bad = "      url: ftp://x\n      tmeout: 1s"
    problems = problems_with(config_dir, "      url: http://127.0.0.1:19090", bad)
    assert sorted(str(p) for p in problems) == [
        "oncall.yaml:12:12: contexts.eu.prometheus.url: URL scheme must be http or https, "
        "not ftp (got 'ftp://x')",
        "oncall.yaml:13:7: contexts.eu.prometheus.tmeout: unknown key 'tmeout'; "
        "did you mean 'timeout'?",
    ]


def test_a_top_level_error_is_not_repeated_for_every_context(config_dir: Path) -> None:
    problems = problems_with(config_dir, "timeout: 7s", "timeout: x")
    assert [p.key for p in problems] == ["prometheus.timeout"]


def test_a_kube_context_missing_from_its_kubeconfig_is_a_located_error(config_dir: Path) -> None:
    (problem,) = problems_with(config_dir, "context: kind-us", "context: kind-asia")
    assert (problem.where, problem.key) == ("oncall.yaml:20:16", "contexts.us.kubernetes.context")
    assert "no context 'kind-asia'" in problem.message
    assert "kind-eu, kind-us" in problem.message


def test_kube_target_names_the_api_server(config_dir: Path) -> None:
    us = load_settings(cwd=config_dir, environ={}, context="us").settings
    target = kube_target(us.kubernetes, environ={})
    assert (target.context, target.server) == ("kind-us", "https://127.0.0.1:7443")
    assert target.label == "kind-us (https://127.0.0.1:7443)"


def test_a_context_secret_is_registered_for_redaction(config_dir: Path) -> None:
    load_settings(cwd=config_dir, environ={})
    assert "s3cret-us" not in redact("redis://:s3cret-us@127.0.0.1:16379/0 and s3cret-us")


def test_config_show_context_prints_its_values_and_sources(config_dir: Path) -> None:
    result = run_oncall("config", "show", "--context", "us", "-o", "json", cwd=config_dir)
    assert result.code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["settings"]["context"] == {"name": "us", "production": True}
    assert "s3cret-us" not in result.stdout
    assert body["sources"]["redis.url"] == "oncall.yaml:18 (context us)"
    assert body["sources"]["context.production"] == "oncall.yaml:16 (context us)"
    assert "contexts" not in body["settings"]


def test_an_unknown_context_on_any_command_exits_2(config_dir: Path) -> None:
    result = run_oncall("alerts", "--context", "asia", cwd=config_dir, env={})
    assert result.code == 2
    assert "no context 'asia'" in result.stderr
    assert "eu, us" in result.stderr
    environ = {"ONCALL_CONTEXT": "asia"}
    assert run_oncall("config", "show", cwd=config_dir, env=environ).code == 2
