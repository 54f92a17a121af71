"""Each backend's client made from its settings section: the one door to every client.

Probes, the alert engine, the service and remediations all make their clients here, so that a
setting (a token, a header, a timeout) is read the same way everywhere. Secrets are unwrapped
only here, on their way into the client. The write path's three writers (Kubernetes,
Alertmanager silences, Redis keys) are made in `remediation/clients.py`, from the connections
made here (`alertmanager_connection`, the same `KubernetesSettings`): a module of this file
may not import a mutating one, or the read-only `oncall serve` would (import-linter).
`tests/test_one_door.py` fails when any other module makes a client.

The client modules are imported when a factory is called, not when this module is: a command
that needs Prometheus does not pay for the Redis client's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from oncall.backends.alertmanager import AlertmanagerClient
    from oncall.backends.gpu import NvmlClient
    from oncall.backends.kube import KubeReader
    from oncall.backends.prometheus import PrometheusClient
    from oncall.backends.redis import RedisClient
    from oncall.backends.vllm import VllmClient
    from oncall.settings.model import (
        AlertmanagerSettings,
        GpuSettings,
        GuardsSettings,
        KubernetesSettings,
        PrometheusSettings,
        RedisSettings,
        VllmSettings,
    )


class AlertmanagerConnection(NamedTuple):
    url: str
    timeout: float
    bearer_token: str | None


def prometheus_client(settings: PrometheusSettings) -> PrometheusClient:
    """A client of the configured Prometheus (bearer token, extra headers and timeout from the
    settings)."""
    from oncall.backends.prometheus import PrometheusClient

    token = settings.bearer_token.get_secret_value() if settings.bearer_token else None
    headers = {name: value.get_secret_value() for name, value in settings.headers.items()}
    return PrometheusClient(
        settings.url, timeout=settings.timeout, bearer_token=token, headers=headers
    )


def alertmanager_connection(settings: AlertmanagerSettings) -> AlertmanagerConnection | None:
    """Where and how to reach the configured Alertmanager (URL, timeout, unwrapped token);
    None when `alertmanager.url` is not set. The read client below and remediations' writer
    (made in `remediation/clients.py`, so that read-only layers never import a mutating module)
    are both built from it."""
    if settings.url is None:
        return None
    token = settings.bearer_token.get_secret_value() if settings.bearer_token else None
    return AlertmanagerConnection(settings.url, settings.timeout, token)


def alertmanager_client(settings: AlertmanagerSettings) -> AlertmanagerClient | None:
    """A client of the configured Alertmanager; None when `alertmanager.url` is not set."""
    connection = alertmanager_connection(settings)
    if connection is None:
        return None
    from oncall.backends.alertmanager import AlertmanagerClient

    return AlertmanagerClient(
        connection.url, timeout=connection.timeout, bearer_token=connection.bearer_token
    )


def redis_client(settings: RedisSettings) -> RedisClient:
    """A client of the service's Redis (password and timeout from the settings)."""
    from oncall.backends.redis import RedisClient

    password = settings.password.get_secret_value() if settings.password else None
    return RedisClient(settings.url, timeout=settings.timeout, password=password)


def approval_redis_client(guards: GuardsSettings, redis: RedisSettings) -> RedisClient | None:
    """The approvers' own Redis user (`guards.approval_redis_url`), with the service Redis'
    timeout; None: approvals are written as the one user of `redis.url`."""
    if guards.approval_redis_url is None:
        return None
    from oncall.backends.redis import RedisClient

    secret = guards.approval_redis_password
    password = secret.get_secret_value() if secret else None
    return RedisClient(guards.approval_redis_url, timeout=redis.timeout, password=password)


async def kube_reader(settings: KubernetesSettings) -> KubeReader:
    """A reader of the configured cluster; the kubeconfig (or the in-cluster service account)
    is loaded off the event loop, as every Kubernetes client is (`KubeReader.open`)."""
    from oncall.backends.kube import KubeReader

    return await KubeReader.open(settings)


def vllm_client(settings: VllmSettings, url: str) -> VllmClient:
    """A client of one of the configured vLLM servers (`url` is one of `settings.urls`)."""
    from oncall.backends.vllm import VllmClient

    key = settings.api_key.get_secret_value() if settings.api_key else None
    return VllmClient(url, timeout=settings.timeout, api_key=key)


def nvml_client(settings: GpuSettings) -> NvmlClient:
    """This host's GPUs through NVML (initialised on first read, not here)."""
    from oncall.backends.gpu import NvmlClient

    return NvmlClient(timeout=settings.timeout)
