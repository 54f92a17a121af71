"""A remediation acts only in its alert's context: the plan carries it, the executor refuses
another, the door sends each alert to its own context's runner, production types its name."""

from __future__ import annotations

import dataclasses

from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import Proposal
from oncall.model.write_path import Preview, render_preview
from oncall.service.contexts import ContextRemediations
from oncall.service.remediation import AlertContext, LiveRemediations, RemediationRequest
from oncall.settings import Settings
from tests.remediation.fakes import make_world
from tests.remediation.note_action import SetNote
from tests.tui.fakes import status
from tests.tui.test_confirm import FakeRemediations, seqs_preview

SETTINGS = Settings.model_validate(
    {
        "audit": {"redis_stream": None, "kube_events": False, "local_only": True},
        "contexts": {"eu": {}, "us": {"production": True}},
    }
)


async def never_asked(_preview: Preview) -> bool:
    raise AssertionError("a plan of another context must not be shown to confirm")


async def test_a_plan_of_one_context_is_refused_by_another_contexts_executor(
    note: SetNote,
) -> None:
    eu, us = make_world(SETTINGS.for_context("eu")), make_world(SETTINGS.for_context("us"))
    plan = await eu.remediator.plan("set-note", {"text": "calm"})
    assert plan.cluster is not None and plan.cluster.context == "eu"
    assert "context eu" in render_preview(Preview(plan, None))
    outcome = await us.remediator.run(plan, never_asked)
    assert outcome.status == "refused" and outcome.refusal is not None
    assert outcome.refusal.guard == "context"
    assert "planned in context 'eu'" in outcome.message
    assert note.store.writes == []
    assert [(r["transition"], r["context"]) for r in us.log.records()] == [("refused", "us")]


async def test_the_plans_own_context_runs_and_every_record_names_it(note: SetNote) -> None:
    eu = make_world(SETTINGS.for_context("eu"))
    plan = await eu.remediator.plan("set-note", {"text": "calm"})

    async def yes(_preview: Preview) -> bool:
        return True

    outcome = await eu.remediator.run(plan, yes)
    assert outcome.status == "verified"
    assert {r["context"] for r in eu.log.records()} == {"eu"}


async def test_in_production_the_typed_word_names_the_context(note: SetNote) -> None:
    us = make_world(SETTINGS.for_context("us"))
    plan = await us.remediator.plan("set-note", {"text": "calm"})
    assert plan.cluster is not None and plan.cluster.production
    assert plan.needs_typing and not plan.dangerous
    assert plan.confirm_word == f"us/{plan.target.name}"


def ctx_status(context: str) -> RuleStatus:
    return dataclasses.replace(status("LLMHighP99Latency", "firing", value=2.0), context=context)


async def test_the_door_sends_an_alert_to_its_own_contexts_runner_only() -> None:
    eu, us = FakeRemediations(seqs_preview()), FakeRemediations(seqs_preview())
    door = ContextRemediations({"eu": eu, "us": us})
    proposal = Proposal(id="p", action="set-note", title="t", params={}, step="s")

    async def no(_preview: Preview) -> bool:
        return False

    alert = AlertContext("us/LLMHighP99Latency", ctx_status("us"))
    await door.run(RemediationRequest(proposal, alert), no, lambda _line: None)
    assert [call[1].name for call in us.calls] == ["LLMHighP99Latency"] and eu.calls == []
    # A key and a state of different contexts: nothing runs anywhere.
    mixed = AlertContext("eu/LLMHighP99Latency", ctx_status("us"))
    result = await door.run(RemediationRequest(proposal, mixed), no, lambda _line: None)
    assert result.status == "not planned" and eu.calls == [] and len(us.calls) == 1


async def test_a_live_runner_refuses_an_alert_of_another_context() -> None:
    runner = LiveRemediations(SETTINGS.for_context("eu"))
    proposal = Proposal(id="p", action="set-note", title="t", params={}, step="s")
    alert = AlertContext("LLMHighP99Latency", ctx_status("us"))
    result = await runner.run(RemediationRequest(proposal, alert), never_asked, lambda _line: None)
    assert result.status == "not planned" and "context 'us'" in result.message
