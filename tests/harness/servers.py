"""Real redis-server, prometheus and alertmanager for tests, each in a temporary directory on
a free port."""

from __future__ import annotations

import contextlib
import functools
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis
import yaml

from oncall.model.alerts import AlertRule
from oncall.settings.durations import format_duration
from oncall_drill.components import alerting_config, alertmanager_argv
from tests.harness.processes import free_port, require_binary, serving


@dataclass
class RunningServer:
    name: str
    port: int
    url: str
    proc: subprocess.Popen[bytes]
    directory: Path

    @property
    def pid(self) -> int:
        return self.proc.pid


def _redis_ready(port: int) -> bool:
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=0.5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.AuthenticationError, redis.ResponseError):
        return True  # it answered, if only to ask for a password
    except redis.RedisError:
        return False


@contextlib.contextmanager
def redis_server(directory: Path, *extra_args: str) -> Iterator[RunningServer]:
    """A redis-server without persistence, latency monitor on (so LATENCY LATEST has data)."""
    binary = require_binary("redis-server", "redis-server")
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [
        binary,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(directory),
        "--save", "",
        "--appendonly", "no",
        "--daemonize", "no",
        "--latency-monitor-threshold", "1",
        *extra_args,
    ]  # fmt: skip
    log = directory / "redis.log"
    ready = functools.partial(_redis_ready, port)
    with serving(argv, log, ready, timeout=10, what="redis-server to answer PING") as proc:
        yield RunningServer("redis-server", port, f"redis://127.0.0.1:{port}/0", proc, directory)


def rule_file_text(*rules: AlertRule) -> str:
    """A Prometheus rule file holding `rules` (their groups in order of appearance): the YAML
    for a real Prometheus to evaluate the same rules a test builds as AlertRules."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for rule in rules:
        entry: dict[str, Any] = {"alert": rule.name, "expr": rule.expr}
        if rule.for_s:
            entry["for"] = format_duration(rule.for_s)
        if rule.keep_firing_for_s:
            entry["keep_firing_for"] = format_duration(rule.keep_firing_for_s)
        if rule.labels:
            entry["labels"] = dict(rule.labels)
        if rule.annotations:
            entry["annotations"] = dict(rule.annotations)
        groups.setdefault(rule.group, []).append(entry)
    doc = {"groups": [{"name": name, "rules": entries} for name, entries in groups.items()]}
    return yaml.safe_dump(doc, sort_keys=False)


def _prometheus_ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=0.5, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def prometheus_server(
    directory: Path,
    *,
    scrape_configs: list[dict[str, Any]] | None = None,
    rule_files: list[Path] | None = None,
    interval: str = "1s",
    alertmanager_port: int | None = None,
    openmetrics: str | None = None,
) -> Iterator[RunningServer]:
    """A prometheus scraping and evaluating every `interval`, with the given jobs and rules,
    sending its alerts to the Alertmanager on `alertmanager_port` when given, and holding the
    samples of `openmetrics` (text with timestamps, backfilled by `promtool tsdb
    create-blocks-from openmetrics` before it starts: a series shaped sample by sample)."""
    binary = require_binary("prometheus", "prometheus")
    directory.mkdir(parents=True, exist_ok=True)
    if openmetrics is not None:
        source = directory / "backfill.om"
        source.write_text(openmetrics)
        promtool = require_binary("promtool", "prometheus")
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source),
             str(directory / "data")],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    port = free_port()
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(path) for path in rule_files or []],
        "scrape_configs": scrape_configs or [],
    }
    argv_extra: list[str] = []
    if alertmanager_port is not None:
        config["alerting"] = alerting_config(alertmanager_port)
        # Alerts sent before Alertmanager is discovered are dropped and sent again only a
        # resend delay later (default 1m): a second, as the drill does.
        argv_extra.append("--rules.alert.resend-delay=1s")
    config_file = directory / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    argv = [
        binary,
        f"--config.file={config_file}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
        *argv_extra,
    ]
    log = directory / "prometheus.log"
    url = f"http://127.0.0.1:{port}"
    ready = functools.partial(_prometheus_ready, url)
    with serving(argv, log, ready, timeout=30, what="prometheus to be ready") as proc:
        yield RunningServer("prometheus", port, url, proc, directory)


@contextlib.contextmanager
def alertmanager_server(directory: Path) -> Iterator[RunningServer]:
    """The real Alertmanager with the drill's route and inhibition rules, gossip off."""
    require_binary("prometheus-alertmanager", "prometheus-alertmanager")
    port = free_port()
    argv = alertmanager_argv(port, directory)
    url = f"http://127.0.0.1:{port}"
    ready = functools.partial(_prometheus_ready, url)  # the same /-/ready endpoint
    with serving(argv, directory / "alertmanager.log", ready, timeout=30,
                 what="alertmanager to be ready") as proc:  # fmt: skip
        yield RunningServer("alertmanager", port, url, proc, directory)
