"""acknowledge: "I am on it" — a firing alert acknowledged team-wide, with who, when and a note.

Kept in Redis (oncall/backends/acks.py) for `alerts.ack_ttl` or until the alert resolves, and
shown on every operator's board and in `oncall alerts`. It silences nothing: Alertmanager
still notifies (a silence is the `silence` action). An action like the others so that it is
confirmed, refused in read-only mode and audited (proposed, approved, started, succeeded,
verified) by the one executor.

The author is the operator's identity (the Kubernetes username, else the OS account of the
real uid; never `$USER`). The precondition is the acknowledgement read when planning: one made
by someone else meanwhile refuses this one, so two people do not both think they have it.
It is compared twice: just before the write (`changed_since_plan`, a refusal), and in the
write itself (`AckStore.put_if`, one WATCH/MULTI/EXEC), which closes the gap between the two:
of two processes confirming at the same instant, one writes and the other fails with who did.
That atomic write is the guard, so no Kubernetes Lease is taken (`unleased`): acknowledging
works with no kubeconfig, or with the Kubernetes API down.

Command-line equivalents: `redis-cli HGET oncall:acks ALERT`, `redis-cli HSET oncall:acks
ALERT '{"by": …}'`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from oncall.backends.acks import ACKS_KEY, AckStore
from oncall.model.action_params import AcknowledgeParams
from oncall.model.alertmanager import Acknowledgement
from oncall.model.write_path import Plan, Precondition, Target
from oncall.remediation.action import Action, Say, TargetChanged
from oncall.remediation.actions.silence import operator_name
from oncall.remediation.clients import Clients

#: The precondition: who had acknowledged the alert when the plan was made (None: no one).
CURRENT = "acknowledged by"
#: The precondition the atomic write compares: that acknowledgement whole (None: no one's).
READ = "acknowledgement read"


def _shown(ack: Acknowledgement | None) -> str:
    if ack is None:
        return "not acknowledged"
    when = time.strftime("%H:%M:%SZ", time.gmtime(ack.at))
    return f"acknowledged by {ack.by} at {when}" + (f": {ack.note}" if ack.note else "")


def _store(clients: Clients) -> AckStore:
    return AckStore(clients.redis_client())


class Acknowledge(Action[AcknowledgeParams]):
    name = "acknowledge"
    params = AcknowledgeParams
    unleased = (
        "Redis only; the acknowledgement read when planning is compared and the new one "
        "written in one WATCH/MULTI/EXEC"
    )

    async def plan(self, params: AcknowledgeParams, clients: Clients) -> Plan:
        current = await _store(clients).get(params.alert)
        author = await operator_name(clients)
        ttl = float(clients.settings.alerts.ack_ttl)
        value = {"by": author, "note": params.note, "ttl_s": ttl}
        return Plan(
            action=self.name,
            params={**params.model_dump(), "by": author},
            target=Target("Alert", params.alert),
            before=_shown(current),
            after=f"acknowledged by {author} for {ttl / 3600:g}h or until it resolves"
            + (f": {params.note}" if params.note else "")
            + " (nothing is silenced)",
            request={"command": ["HSET", ACKS_KEY, params.alert, value]},
            dangerous=False,
            confirm_word="yes",
            preconditions=(
                Precondition(CURRENT, current.by if current else None),
                Precondition(READ, None if current is None else dataclasses.asdict(current)),
            ),
        )

    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        current = await _store(clients).get(plan.params["alert"])
        return {"current": _shown(current), "note": "Redis has no dry run: value read back"}

    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        expected = plan.expected(CURRENT)
        current = await _store(clients).get(plan.params["alert"])
        now = current.by if current else None
        if expected is not None and now == expected.expected:
            return None
        return f"the alert was {_shown(current)} meanwhile"

    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        at = time.time()
        until = at + float(clients.settings.alerts.ack_ttl)
        ack = Acknowledgement(plan.params["by"], at, plan.params.get("note", ""))
        read = plan.expected(READ)
        if read is None:
            raise TargetChanged("the plan has no acknowledgement read to compare with")
        expected = None if read.expected is None else Acknowledgement(**read.expected)
        written, found = await _store(clients).put_if(
            plan.params["alert"], ack, until=until, expected=expected
        )
        if not written:
            raise TargetChanged(f"the alert was {_shown(found)} meanwhile")
        return {"acknowledged": plan.params["alert"], "by": ack.by, "at": at, "until": until,
                "note": ack.note}  # fmt: skip

    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        ack = await _store(clients).get(plan.params["alert"])
        if ack is None or ack.by != result["by"] or ack.at != result["at"]:
            return False, f"read back: {_shown(ack)}"
        return True, f"{plan.params['alert']} {_shown(ack)}"


ACTION = Acknowledge()
