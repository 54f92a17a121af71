"""The team's acknowledgements on the board and in `oncall alerts`: read once per refresh,
joined to the rules' states as `RuleRouting.ack` (the board's routing cell: 'ack alice').

One HGETALL of `oncall:acks` (oncall/backends/acks.py) per refresh, started beside
Prometheus' request and waited for at most `grace` seconds after it answered: a slow or dead
Redis never holds the board. When Redis cannot be asked, every firing or pending rule says
`ack unknown` (with the reason in `ack_error`) and everything else is shown as it is.

An acknowledgement ends when its alert resolves: a rule seen inactive that still has one has
it removed (HDEL, housekeeping of the hash alone), so the next firing starts unacknowledged.
"""

from __future__ import annotations

from oncall.alerts.join import ACTIVE_STATES, AckRead, with_ack
from oncall.backends import from_settings
from oncall.backends.acks import AckStore
from oncall.errors import BackendError
from oncall.model.alerts import RuleStatus
from oncall.service.refresh_read import RefreshRead
from oncall.settings import Settings

Read = AckRead
__all__ = ["ACTIVE_STATES", "AckView", "Read", "with_ack"]


class AckView(RefreshRead[Read]):
    """The latest read of the acknowledgements, and the statuses with them."""

    def __init__(self, store: AckStore, *, grace: float | None = 0.5) -> None:
        super().__init__(grace=grace)
        self.store = store

    @classmethod
    def from_settings(cls, settings: Settings, *, grace: float | None = 0.5) -> AckView:
        return cls(AckStore(from_settings.redis_client(settings.redis)), grace=grace)

    async def _read(self) -> Read:
        try:
            return await self.store.all()
        except BackendError as exc:
            return exc

    async def latest(self) -> Read:
        """This refresh's read, waited for at most `grace` seconds; while it still runs, the
        latest read done (acknowledgements change seldom), or a timeout before any."""
        taken = await self.take()
        read = taken.value
        if read is None:
            read = BackendError("redis", self.store.key, "timeout", "no answer yet")
        return read

    async def annotate(self, statuses: list[RuleStatus]) -> list[RuleStatus]:
        """`statuses` with each active rule's acknowledgement (or `ack unknown`): for statuses
        built already; a refresh builds them with it (`oncall.service.alerts.refresh_joined`)."""
        read = await self.latest()
        await self.clear_resolved(statuses, read)
        return [with_ack(s, read) for s in statuses]

    async def clear_resolved(self, statuses: list[RuleStatus], read: Read) -> None:
        """Remove the acknowledgements of the rules seen resolved (HDEL): the next firing
        starts unacknowledged. Nothing when they could not be read."""
        if isinstance(read, BackendError):
            return
        resolved = [s.rule.name for s in statuses
                    if s.state not in ACTIVE_STATES and s.state != "unknown"
                    and s.rule.name in read]  # fmt: skip
        if resolved:
            try:
                await self.store.clear(resolved)
            except BackendError:
                return  # the next refresh tries again; readers skip them meanwhile
            for name in resolved:
                read.pop(name, None)

    async def aclose(self) -> None:
        await super().aclose()
        await self.store.aclose()
