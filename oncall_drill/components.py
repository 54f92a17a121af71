"""What the drill stack is made of: each process, its command line, and its readiness check.

Ports are picked free on 127.0.0.1 at `drill up`; the command lines here are the only place
that knows how each simulator or real server is started.
"""

from __future__ import annotations

import json
import shutil
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oncall_drill.gpu_sim.layout import Layout
from oncall_drill.netutil import LOOPBACK, port_accepts

PY = [sys.executable, "-m"]
MODEL = "qwen"


class DrillError(Exception):
    """The drill could not do what was asked; the message says what and where to look."""


@dataclass(frozen=True)
class Ports:
    redis: int
    redis_exporter: int
    cluster_api: int
    cluster_api_tls: int
    vllm_service: int
    kube_metrics: int
    gateway: int
    gpu: int
    prometheus: int
    alertmanager: int
    # 0 in the state of a drill started before `oncall serve` joined it.
    serve: int = 0
    notify_sink: int = 0

    def url(self, name: str) -> str:
        return f"http://{LOOPBACK}:{getattr(self, name)}"


def require(binary: str, package: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise DrillError(
            f"{binary} not found: install the Debian package '{package}' "
            f"(apt-get install {package}, or `make setup` as root)"
        )
    return path


def redis_argv(ports: Ports, directory: Path) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    return [
        require("redis-server", "redis-server"),
        "--port", str(ports.redis), "--bind", LOOPBACK, "--dir", str(directory),
        "--save", "", "--appendonly", "no", "--daemonize", "no",
        "--latency-monitor-threshold", "5", "--maxmemory", "64mb",
        "--maxmemory-policy", "allkeys-lru",
    ]  # fmt: skip


def notify_sink_argv(ports: Ports, file: Path) -> list[str]:
    return [*PY, "oncall_drill.notify_sink", "--port", str(ports.notify_sink), "--file", str(file)]


def serve_argv(config: Path) -> list[str]:
    """`oncall serve` with the drill's settings: a process of the app, started like any
    other command (the drill imports nothing of it)."""
    return [*PY, "oncall", "serve", "--config", str(config)]


def redis_exporter_argv(ports: Ports) -> list[str]:
    return [
        require("prometheus-redis-exporter", "prometheus-redis-exporter"),
        f"-redis.addr=redis://{LOOPBACK}:{ports.redis}",
        f"-web.listen-address={LOOPBACK}:{ports.redis_exporter}",
    ]


def dcgm_layout(text: str) -> Layout:
    """The DCGM label layout `drill up --dcgm-layout` names; DrillError when unknown."""
    try:
        return Layout.parse(text)
    except ValueError as exc:
        raise DrillError(str(exc)) from exc


def cluster_argv(
    ports: Ports,
    directory: Path,
    replicas: int,
    layout: Layout | None = None,
    *,
    name_seed: int | None = None,
    fleet: bool = False,
    operator_delay: float | None = None,
    ready_delay: float | None = None,
) -> list[str]:
    seed = [] if name_seed is None else ["--name-seed", str(name_seed)]
    ready = [] if ready_delay is None else ["--ready-delay", f"{ready_delay:g}"]
    managed = (
        [] if operator_delay is None else ["--managed", "--operator-delay", f"{operator_delay:g}"]
    )
    return [
        *PY, "oncall_drill.cluster",
        "--api-port", str(ports.cluster_api),
        "--api-tls-port", str(ports.cluster_api_tls),
        "--service-port", str(ports.vllm_service),
        "--metrics-port", str(ports.kube_metrics),
        "--gpu-port", str(ports.gpu),
        "--kubeconfig", str(directory / "kubeconfig"),
        "--file-sd", str(directory / "targets" / "vllm.json"),
        "--log-dir", str(directory / "logs"),
        "--replicas", str(replicas),
        "--dcgm-layout", (layout or Layout()).text(),
        *seed,
        *ready,
        *(["--fleet"] if fleet else []),
        *managed,
    ]  # fmt: skip


def gateway_argv(ports: Ports) -> list[str]:
    return [
        *PY, "oncall_drill.gateway_sim",
        "--port", str(ports.gateway),
        "--redis-url", f"redis://{LOOPBACK}:{ports.redis}/0",
        "--vllm-url", ports.url("vllm_service"),
        "--model", MODEL,
    ]  # fmt: skip


def loadgen_argv(ports: Ports, rate: float, duration: float, curve: str = "constant") -> list[str]:
    max_requests = max(1, min(100_000, int(rate * duration * 2)))
    return [
        *PY, "oncall_drill.loadgen",
        "--url", ports.url("gateway"), "--rate", f"{rate:g}", "--duration", f"{duration:g}",
        "--max-requests", str(max_requests), "--curve", curve, "--timeout", "10",
        "--max-in-flight", "200",
    ]  # fmt: skip


def prometheus_config(
    ports: Ports, directory: Path, layout: Layout | None = None, fleet: bool = False
) -> dict[str, Any]:
    def static(job: str, port: int) -> dict[str, Any]:
        return {"job_name": job, "static_configs": [{"targets": [f"{LOOPBACK}:{port}"]}]}

    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(directory / "rules" / "*.yaml")],
        "alerting": alerting_config(ports.alertmanager),
        "scrape_configs": [
            static("prometheus", ports.prometheus),
            static("ai-gateway", ports.gateway),
            # As the dcgm-exporter Helm chart's ServiceMonitor scrapes it (layout.py).
            (layout or Layout()).scrape_config("dcgm-exporter", f"{LOOPBACK}:{ports.gpu}"),
            static("redis", ports.redis_exporter),
            static("kube-state-metrics", ports.kube_metrics),
            {
                "job_name": "vllm",
                "file_sd_configs": [
                    {"files": [str(directory / "targets" / "vllm.json")], "refresh_interval": "1s"}
                ],
            },
            *(fleet_scrape_configs(ports, layout or Layout()) if fleet else []),
        ],
    }


def fleet_scrape_configs(ports: Ports, layout: Layout) -> list[dict[str, Any]]:
    """`drill up --fleet`: the other 4,998 pods' kube-state-metrics and 49 nodes' exporters."""
    from oncall_drill.gpu_sim import fleet as gpu_fleet
    from oncall_drill.kube_sim.fleet import node_names

    ksm = {
        "job_name": "kube-state-metrics-fleet",
        "scrape_interval": "15s",
        "scrape_timeout": "10s",
        "metrics_path": "/metrics/fleet",
        "static_configs": [{"targets": [f"{LOOPBACK}:{ports.kube_metrics}"]}],
    }
    gpus = gpu_fleet.scrape_config(layout, f"{LOOPBACK}:{ports.gpu}", node_names()[1:])
    return [ksm, gpus]


def prometheus_argv(
    ports: Ports, directory: Path, layout: Layout | None = None, fleet: bool = False
) -> list[str]:
    config = directory / "prometheus.yml"
    settings = prometheus_config(ports, directory, layout, fleet)
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    return [
        require("prometheus", "prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'prometheus-data'}",
        f"--web.listen-address={LOOPBACK}:{ports.prometheus}",
        "--web.enable-lifecycle",
        "--storage.tsdb.retention.time=2d",
        # Alerts sent before Alertmanager is discovered are dropped, and sent again only a
        # resend delay later (default 1m, a long time in a drill).
        "--rules.alert.resend-delay=2s",
    ]


#: Alertmanager's route and inhibitions, as kube-prometheus ships them (its
#: `alertmanager-secret.yaml`): alerts grouped by namespace and alertname, a critical alert
#: inhibiting the warning and info alerts of the same name and namespace. The waits are short
#: because a drill lasts minutes; the receiver sends nothing (the drill has no pager).
ALERTMANAGER_INHIBIT_RULES: list[dict[str, Any]] = [
    {
        "source_matchers": ["severity = critical"],
        "target_matchers": ["severity =~ warning|info"],
        "equal": ["namespace", "alertname"],
    },
    {
        "source_matchers": ["severity = warning"],
        "target_matchers": ["severity = info"],
        "equal": ["namespace", "alertname"],
    },
]


def alertmanager_config(
    webhooks: tuple[str, ...] = (), token_file: Path | None = None
) -> dict[str, Any]:
    """The drill's Alertmanager configuration; with `webhooks`, its receiver sends every
    notification to those URLs (`oncall serve`) as `webhook_configs`, with the bearer token
    read from `token_file` (`http_config.authorization.credentials_file`)."""
    receiver: dict[str, Any] = {"name": "null"}
    if webhooks:
        http_config: dict[str, Any] = {}
        if token_file is not None:
            http_config["authorization"] = {"type": "Bearer", "credentials_file": str(token_file)}
        receiver = {
            "name": "oncall-serve",
            "webhook_configs": [
                {"url": url, "send_resolved": True, "max_alerts": 0, "http_config": http_config}
                for url in webhooks
            ],
        }
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": receiver["name"],
            "group_by": ["namespace", "alertname"],
            "group_wait": "1s",
            "group_interval": "5s",
            "repeat_interval": "12h",
        },
        "receivers": [receiver],
        "inhibit_rules": ALERTMANAGER_INHIBIT_RULES,
    }


def alerting_config(alertmanager_port: int) -> dict[str, Any]:
    """Prometheus' `alerting:` section sending to the Alertmanager on that loopback port."""
    target = f"{LOOPBACK}:{alertmanager_port}"
    return {"alertmanagers": [{"api_version": "v2", "static_configs": [{"targets": [target]}]}]}


def alertmanager_argv(
    port: int, directory: Path, webhooks: tuple[str, ...] = (), token_file: Path | None = None
) -> list[str]:
    """The real Alertmanager on one loopback port, its config and silences in `directory`.

    `--cluster.listen-address=` (empty) turns off the HA gossip, which would otherwise bind
    0.0.0.0:9094: one Alertmanager, loopback only.
    """
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "alertmanager.yml"
    config.write_text(yaml.safe_dump(alertmanager_config(webhooks, token_file), sort_keys=False))
    return [
        require("prometheus-alertmanager", "prometheus-alertmanager"),
        f"--config.file={config}",
        f"--storage.path={directory / 'data'}",
        f"--web.listen-address={LOOPBACK}:{port}",
        "--cluster.listen-address=",
    ]


def http_get(url: str, timeout: float = 1.0) -> tuple[int, bytes]:
    """GET a loopback URL; (0, b"") when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError, TimeoutError):
        return 0, b""


def http_post(url: str, body: object, timeout: float = 2.0) -> tuple[int, bytes]:
    return http_request("POST", url, body=body, timeout=timeout)


def http_request(
    method: str,
    url: str,
    *,
    body: object = None,
    headers: dict[str, str] | None = None,
    timeout: float = 2.0,
) -> tuple[int, bytes]:
    """One HTTP request to a drill component (loopback only); raises DrillError if none answers."""
    data = None if body is None else json.dumps(body).encode()
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(  # noqa: S310 - loopback only
        url, data=data, method=method, headers=all_headers
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise DrillError(f"{method} {url}: {exc}") from exc


def ready(name: str, ports: Ports) -> bool:
    """Is the named component answering the way it will be used?"""
    if name in ("prometheus", "alertmanager"):
        return http_get(f"{ports.url(name)}/-/ready")[0] == 200
    if name == "cluster":
        # Ready pods behind the Service: the vLLM simulators answer through it.
        return http_get(f"{ports.url('vllm_service')}/health")[0] == 200
    if name == "serve":
        return http_get(f"{ports.url('serve')}/readyz")[0] == 200
    port = {
        "notify-sink": ports.notify_sink,
        "redis": ports.redis,
        "redis-exporter": ports.redis_exporter,
        "gateway": ports.gateway,
        "gpu-exporter": ports.gpu,
    }.get(name)
    return port is not None and port_accepts(port)
