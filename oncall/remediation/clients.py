"""The backend clients a remediation talks through, built from the settings in one place.

`Clients.from_settings` is the only place the write path holds settings; the actions and the
executor ask `Clients` for them (made on first use, closed by `aclose`), so a unit test hands
the executor a `Clients` holding fakes instead. Every reader is made by
`oncall.backends.from_settings`, as the read path's are, and the two writers of their own
(Kubernetes', Alertmanager's silences) from the same settings and connection: a setting
(Prometheus' tenant `headers`, a token) reaches the write path exactly as it reaches the
board. No other module makes a client (`tests/test_one_door.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oncall.backends import from_settings
from oncall.backends.alertmanager_write import AlertmanagerWriter
from oncall.backends.identity import KubeIdentity, kube_identity
from oncall.backends.kube_write import KubeWriter
from oncall.backends.prometheus import PrometheusClient
from oncall.backends.redis import RedisClient
from oncall.backends.redis_write import RedisWriter
from oncall.errors import BackendError, UsageError
from oncall.settings import Settings


@dataclass
class Clients:
    """The clients a remediation uses; made on first use, closed by the executor."""

    settings: Settings
    kube: KubeWriter | None = None
    redis: RedisClient | None = None
    approvals: RedisClient | None = None
    #: SelfSubjectReview's answer, or why there is none: asked once, however many ask.
    _identity: KubeIdentity | BackendError | None = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> Clients:
        return cls(settings)

    async def kube_writer(self) -> KubeWriter:
        if self.kube is None:
            self.kube = await KubeWriter.open(self.settings.kubernetes)
        return self.kube

    async def identity(self) -> KubeIdentity:
        """Who the Kubernetes API says we are (`kubectl auth whoami`), asked once; raises the
        same BackendError each time when it cannot say (no kubeconfig, the API down): a
        blackholed API server costs one timeout per remediator, not one per caller."""
        if self._identity is None:
            try:
                self._identity = await kube_identity(await self.kube_writer())
            except BackendError as exc:
                self._identity = exc
        if isinstance(self._identity, BackendError):
            raise self._identity
        return self._identity

    def redis_client(self) -> RedisClient:
        if self.redis is None:
            self.redis = from_settings.redis_client(self.settings.redis)
        return self.redis

    def redis_writer(self) -> RedisWriter:
        return RedisWriter(self.redis_client())

    def approval_writer(self) -> RedisWriter | None:
        """The writer of two-person approvals, as the approvers' Redis user
        (`guards.approval_redis_url`); None: the one Redis user of `redis.url`."""
        if self.approvals is None:
            self.approvals = from_settings.approval_redis_client(
                self.settings.guards, self.settings.redis
            )
        return None if self.approvals is None else RedisWriter(self.approvals)

    def prometheus(self) -> PrometheusClient:
        """A new client, for `async with`: verification reads the service's own gauges (with
        `prometheus.headers`, e.g. a Mimir/Thanos tenant, as every reader does)."""
        return from_settings.prometheus_client(self.settings.prometheus)

    def alertmanager_writer(self) -> AlertmanagerWriter:
        """A new client, for `async with`: silences are written through Alertmanager's API v2."""
        connection = from_settings.alertmanager_connection(self.settings.alertmanager)
        if connection is None:
            raise UsageError("no Alertmanager is configured: set alertmanager.url")
        return AlertmanagerWriter(
            connection.url, timeout=connection.timeout, bearer_token=connection.bearer_token
        )

    async def aclose(self) -> None:
        if self.kube is not None:
            await self.kube.aclose()
        if self.redis is not None:
            await self.redis.aclose()
        if self.approvals is not None:
            await self.approvals.aclose()
