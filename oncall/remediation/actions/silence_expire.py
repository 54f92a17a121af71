"""silence-expire: end one Alertmanager silence now (amtool silence expire ID).

Its own action rather than a mode of `silence`: it has its own target (one silence by id),
its own before → after (active until … → expired) and its own precondition (the silence is
still the one shown: same end, same matchers), and the audit log names what was done.

Plan: the silence as Alertmanager holds it (`GET /api/v2/silence/{id}`); an expired one is not
planned. Alertmanager keeps an expired silence listed (state `expired`) until its retention
ends, which is what `verify` reads back.

No Kubernetes Lease (`Action.unleased`): the write goes to Alertmanager alone, and the silence
is read again just before the DELETE; of two processes expiring one silence at once, one ends
it and the other is refused ("expired meanwhile") or told by Alertmanager that it has already
expired. Works with no kubeconfig, or with the Kubernetes API down.

Command-line equivalents: `amtool silence query -q ID`, `amtool silence expire ID`.
"""

from __future__ import annotations

from typing import Any

from oncall.backends.alertmanager import parse_silence
from oncall.errors import BackendError
from oncall.model.action_params import SilenceExpireParams
from oncall.model.write_path import Plan, Precondition, Target
from oncall.remediation.action import Action, PlanError, Say
from oncall.remediation.clients import Clients

#: The precondition: the silence's end and matchers when the plan was made.
SHOWN = "silence as shown"


def _facts(silence: dict[str, Any]) -> dict[str, Any]:
    return {"endsAt": silence.get("endsAt"), "matchers": _matchers(silence)}


def _matchers(silence: dict[str, Any]) -> str:
    try:
        return parse_silence(silence).matchers_text()
    except (KeyError, TypeError, ValueError):
        return "{?}"  # shown as unreadable; the precondition compares it as it is


def describe(silence: dict[str, Any]) -> str:
    """'active until 2026-…Z: {pod="vllm-0"} by alice: rollout'."""
    matchers = _matchers(silence)
    state = (silence.get("status") or {}).get("state", "unknown")
    return (
        f"{state} until {silence.get('endsAt')}: {matchers} by {silence.get('createdBy')}: "
        f"{silence.get('comment')}"
    )


async def _read(clients: Clients, silence_id: str) -> dict[str, Any]:
    async with clients.alertmanager_writer() as am:
        try:
            return await am.silence(silence_id)
        except BackendError as exc:
            if exc.http_status == 404:
                raise PlanError(f"Alertmanager has no silence {silence_id}") from exc
            raise


class SilenceExpire(Action[SilenceExpireParams]):
    name = "silence-expire"
    params = SilenceExpireParams
    unleased = (
        "Alertmanager only; the silence is read again just before it is expired, and "
        "expiring it twice ends it once"
    )

    async def plan(self, params: SilenceExpireParams, clients: Clients) -> Plan:
        silence = await _read(clients, params.silence_id)
        if (silence.get("status") or {}).get("state") == "expired":
            raise PlanError(f"silence {params.silence_id} has expired already")
        return Plan(
            action=self.name,
            params=params.model_dump(),
            target=Target("Silence", params.silence_id),
            before=describe(silence),
            after="expired (its alerts notify again)",
            request={"method": "DELETE", "path": f"/api/v2/silence/{params.silence_id}"},
            dangerous=False,
            confirm_word="yes",
            preconditions=(Precondition(SHOWN, _facts(silence)),),
        )

    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        silence = await _read(clients, plan.params["silence_id"])
        return {"current": describe(silence), "note": "Alertmanager has no dry run: read back"}

    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        expected = plan.expected(SHOWN)
        silence = await _read(clients, plan.params["silence_id"])
        if (silence.get("status") or {}).get("state") == "expired":
            return "the silence expired meanwhile"
        if expected is None or _facts(silence) != expected.expected:
            return f"the silence changed meanwhile: now {describe(silence)}"
        return None

    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        async with clients.alertmanager_writer() as am:
            await am.expire_silence(plan.params["silence_id"])
        return {"expired": plan.params["silence_id"]}

    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        silence = await _read(clients, plan.params["silence_id"])
        state = (silence.get("status") or {}).get("state")
        if state != "expired":
            return False, f"silence {plan.params['silence_id']} is still {state}"
        return True, f"silence {plan.params['silence_id']} expired at {silence.get('endsAt')}"


ACTION = SilenceExpire()
