"""Each backend's client made from its settings section, in one place per backend.

Probes, the alert engine, the service and remediations all make their clients here, so that a
setting (a token, a timeout) is read the same way everywhere. Secrets are unwrapped only here,
on their way into the client. Kubernetes has its own `KubeReader.open(settings)` (and
`KubeWriter.open`): loading a kubeconfig is a blocking call that belongs with the client.

The client modules are imported when a factory is called, not when this module is: a command
that needs Prometheus does not pay for the Redis client's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from oncall.backends.alertmanager import AlertmanagerClient
    from oncall.backends.gpu import NvmlClient
    from oncall.backends.prometheus import PrometheusClient
    from oncall.backends.redis import RedisClient
    from oncall.backends.vllm import VllmClient
    from oncall.settings.model import (
        AlertmanagerSettings,
        GpuSettings,
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


def vllm_client(settings: VllmSettings, url: str) -> VllmClient:
    """A client of one of the configured vLLM servers (`url` is one of `settings.urls`)."""
    from oncall.backends.vllm import VllmClient

    key = settings.api_key.get_secret_value() if settings.api_key else None
    return VllmClient(url, timeout=settings.timeout, api_key=key)


def nvml_client(settings: GpuSettings) -> NvmlClient:
    """This host's GPUs through NVML (initialised on first read, not here)."""
    from oncall.backends.gpu import NvmlClient

    return NvmlClient(timeout=settings.timeout)
