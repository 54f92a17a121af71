"""The confirm modal of a remediation, driven by a fake `RemediationRunner` at the service seam.

The fake calls the real modal through `confirm`, streams progress lines gated by events the
test opens (no sleeping), and returns a scripted result. The last tests run `LiveRemediations`
over a stand-in `Remediator`: the preview, the answer and the progress reach the app's
callbacks, on the app's loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Input, Static

from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import Proposal, StepResult
from oncall.model.write_path import (
    Confirm,
    GuardVerdict,
    Outcome,
    Plan,
    Preview,
    Progress,
    RemediationResult,
    Target,
)
from oncall.remediation.action import PlanError
from oncall.remediation.actions.set_degradation_level import stored_level
from oncall.service.remediation import AlertContext, LiveRemediations, RemediationRequest
from oncall.tui.app import OncallApp
from oncall.tui.confirm import ConfirmScreen
from oncall.tui.incident import IncidentScreen
from tests.harness.waiting import until
from tests.tui.chart_fakes import FakeCharts
from tests.tui.fakes import (
    LOWER_SEQS,
    P99,
    FakeAlerts,
    FakeChecklists,
    FakeClock,
    board_statuses,
    p99_events,
    p99_script,
    settings,
    status,
)
from tests.tui.snapshot_sizes import SIZES, Compare

UID = "3f6c2a1e-8b0d-4c52-9e51-0d7a4b2f9c11"
SINCE = "2026-01-01T00:00:00+00:00"
ACTION_ID = "20260101T000000Z-7f3a9c"

OK_GUARDS = (
    GuardVerdict("read-only", True, "not in read-only mode"),
    GuardVerdict("rate-limit", True, "rate limit: 0 of 3 actions on deployment-ai-vllm in 10m"),
    GuardVerdict("circuit-breaker", True, "closed: 0 failures in the last 10m"),
)
LEASE_HELD = GuardVerdict(
    "lease",
    False,
    f"bob@ops-2 is acting on Deployment ai/vllm (since {SINCE})",
    {"holder": "bob@ops-2", "since": SINCE},
)


def seqs_preview(*verdicts: GuardVerdict) -> Preview:
    """Lower --max-num-seqs on Deployment ai/vllm: dangerous, the name must be typed."""
    plan = Plan(
        action="set-max-num-seqs",
        params={"deployment": "vllm", "value": 64},
        target=Target("Deployment", "vllm", "ai", UID),
        before="--max-num-seqs 256 (separate form, container vllm)",
        after="--max-num-seqs 64, rolled out to every pod",
        request={
            "method": "PATCH",
            "path": "/apis/apps/v1/namespaces/ai/deployments/vllm",
            "content_type": "application/json-patch+json",
            "body": [
                {"op": "test", "path": "/spec/template/spec/containers/0/args/3", "value": "256"},
                {"op": "replace", "path": "/spec/template/spec/containers/0/args/3", "value": "64"},
            ],
        },
        dangerous=True,
        confirm_word="vllm",
        undo={"deployment": "vllm", "value": 256},
    )
    return Preview(plan, {"server": "patch accepted (dry run)", "generation": 8}, verdicts)


def level_preview() -> Preview:
    """Degradation level 1: not dangerous, Yes is enough."""
    plan = Plan(
        action="set-degradation-level",
        params={"level": 1},
        target=Target("RedisKey", "ai:degradation-level"),
        before="level 0 (normal)",
        after="level 1 (RAG off, base LLM only)",
        request={"command": ["SET", "ai:degradation-level", "1"]},
        dangerous=False,
        confirm_word="yes",
        undo={"level": 0},
    )
    return Preview(plan, {"current": "0", "note": "Redis has no dry run: value read back"})


DEGRADE = Proposal(
    id="degrade-to-1",
    action="set-degradation-level",
    title="Switch RAG off (degradation level 1)",
    params={"level": 1},
    step="gpu_memory",
)

VERIFIED = RemediationResult(
    "verified",
    "rolled out: 2/2 pods run --max-num-seqs 64",
    ACTION_ID,
    undo_command=f"oncall remediate rollback {ACTION_ID}",
)


@dataclass
class FakeRemediations:
    """Asks the real modal through `confirm`, then plays `script`: a `str` is a progress line,
    an `asyncio.Event` a gate to wait on. A refused preview is shown and then refused."""

    preview: Preview
    script: list[str | asyncio.Event] = field(default_factory=list)
    result: RemediationResult = VERIFIED
    calls: list[tuple[Proposal, AlertContext, StepResult | None]] = field(default_factory=list)
    answers: list[bool] = field(default_factory=list)
    #: Planning takes until this gate opens (None: at once).
    planning: asyncio.Event | None = None

    async def run(
        self, request: RemediationRequest, confirm: Confirm, progress: Progress
    ) -> RemediationResult:
        self.calls.append((request.proposal, request.alert, request.evidence))
        if self.planning is not None:
            await self.planning.wait()
        answer = await confirm(self.preview)
        self.answers.append(answer)
        if self.preview.refused:
            first = self.preview.refused[0]
            message = f"refused ({first.guard}): {first.reason}"
            return RemediationResult("refused", message, ACTION_ID, refusal=first)
        if not answer:
            return RemediationResult("declined", "declined: nothing was changed", ACTION_ID)
        for item in self.script:
            if isinstance(item, asyncio.Event):
                await item.wait()
            else:
                progress(item)
        return self.result


def make_app(runner: FakeRemediations, clock: FakeClock | None = None) -> OncallApp:
    checklists = FakeChecklists({P99: p99_script()})
    clock = clock or FakeClock()
    app = OncallApp(
        settings(),
        alerts_source=FakeAlerts(board_statuses()),
        checklist_runner=checklists,
        remediation_runner=runner,
        clock=clock,
    )
    app.chart_source = FakeCharts(clock)  # fixed series, no Prometheus
    return app


def modal(app: OncallApp) -> ConfirmScreen:
    screen = app.screen
    assert isinstance(screen, ConfirmScreen)
    return screen


def text(screen: ConfirmScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def visible(widget: Static) -> bool:
    return widget.display


def yes_disabled(app: OncallApp) -> bool:
    return modal(app).query_one("#yes", Button).disabled


async def open_modal(pilot: Pilot[None], key: str = "p") -> ConfirmScreen:
    """The P99 incident with its run finished, then `key`; the modal once it is up."""
    app = pilot.app
    assert isinstance(app, OncallApp)
    await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
    await pilot.press("enter")
    await until(pilot, lambda: not app.book.runs[P99].running, "the end of the run")
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm modal")
    return modal(app)


def proposals_text(app: OncallApp) -> str:
    screen = app.screen
    assert isinstance(screen, IncidentScreen)
    return str(screen.query_one("#proposals", Static).render())


# -- Pilot: the flows ---------------------------------------------------------------------------


async def test_a_dangerous_action_needs_the_exact_name_before_yes() -> None:
    runner = FakeRemediations(seqs_preview(*OK_GUARDS))
    app = make_app(runner)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_modal(pilot)
        proposal, alert, evidence = runner.calls[0]
        assert proposal == LOWER_SEQS
        assert alert.name == P99 and alert.status is not None and alert.status.state == "firing"
        assert alert.latest is not None and alert.latest() is app.book.statuses[P99]
        assert evidence is not None and evidence.id == "gpu_memory"

        preview = text(screen, "#confirm-preview")
        assert f"Deployment ai/vllm  UID {UID}" in preview
        assert "before   --max-num-seqs 256 (separate form, container vllm)" in preview
        assert "after    --max-num-seqs 64, rolled out to every pod" in preview
        assert 'dry run  {"generation": 8, "server": "patch accepted (dry run)"}' in preview
        assert "✓ ok      read-only: not in read-only mode" in preview
        assert "Type the target's name (vllm) to enable Yes:" in text(screen, "#confirm-prompt")
        assert screen.query_one("#confirm-word", Input).has_focus
        assert yes_disabled(app)

        await pilot.press("v", "l", "m", "enter", "y")  # a wrong name: enter and y do nothing
        assert isinstance(app.screen, ConfirmScreen) and not screen.answer.done()
        assert yes_disabled(app)
        await pilot.press("backspace", "backspace", "l", "m", "x")
        assert yes_disabled(app)  # "vllmx" is not the name either
        await pilot.press("backspace")
        assert not yes_disabled(app)  # "vllm": now Yes may be pressed
        await pilot.press("enter")
        await until(pilot, lambda: runner.answers == [True], "the runner told yes")
        await until(pilot, lambda: modal(app).phase == "done", "the result")
        assert "✓ verified: rolled out: 2/2 pods run --max-num-seqs 64" in text(
            screen, "#confirm-progress"
        )


async def test_details_toggles_the_full_request() -> None:
    runner = FakeRemediations(seqs_preview(*OK_GUARDS))
    app = make_app(runner)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_modal(pilot)
        request = screen.query_one("#confirm-request", Static)
        assert not visible(request)
        await pilot.press("tab", "tab", "enter")  # input → (Yes disabled) No → Details
        assert visible(request)
        assert '"op": "test"' in str(request.render())
        assert '"path": "/apis/apps/v1/namespaces/ai/deployments/vllm"' in str(request.render())
        assert str(screen.query_one("#details", Button).label) == "Hide details"
        await pilot.press("d")  # the key of Details (a button ignores a second enter for 0.2 s)
        assert not visible(request)
        await pilot.press("escape")
        await until(pilot, lambda: runner.answers == [False], "declined")


async def test_esc_declines_and_nothing_runs() -> None:
    runner = FakeRemediations(seqs_preview(*OK_GUARDS), script=["must not run"])
    app = make_app(runner)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_modal(pilot)
        await pilot.press("v", "l", "l", "m", "escape")  # even with the name typed, esc is No
        await until(pilot, lambda: runner.answers == [False], "the runner told no")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), "the modal closed")
        await until(pilot, lambda: "declined" in proposals_text(app), "the outcome shown")
        assert f"Last action: - declined: nothing was changed · audit {ACTION_ID}" in (
            proposals_text(app)
        )


async def test_the_modal_shows_the_plans_notes_as_written_for_people() -> None:
    _, note = stored_level(None, "Redis key ai:degradation-level")
    assert note is not None
    preview = level_preview()
    noted = dataclasses.replace(preview, plan=dataclasses.replace(preview.plan, notes=(note,)))
    app = make_app(FakeRemediations(noted))
    async with app.run_test(size=(100, 30)) as pilot:
        shown = text(await open_modal(pilot), "#confirm-preview")
        assert "note     Redis key ai:degradation-level is not set: the gateway serves level 0" in (
            shown
        )
        assert "raw value" not in shown and "None" not in shown


async def test_a_refused_guard_disables_yes_and_names_the_lease_holder() -> None:
    runner = FakeRemediations(seqs_preview(*OK_GUARDS, LEASE_HELD))
    app = make_app(runner)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_modal(pilot)
        assert yes_disabled(app)
        assert not screen.query("#confirm-word")  # nothing to type: it cannot run anyway
        assert screen.query_one("#no", Button).has_focus
        preview = text(screen, "#confirm-preview")
        assert "✗ REFUSED lease: bob@ops-2 is acting on Deployment ai/vllm" in preview
        prompt = text(screen, "#confirm-prompt")
        assert prompt == f"✗ Refused by lease: held by bob@ops-2 since {SINCE}. Yes is disabled."
        await pilot.press("y", "shift+tab", "enter")  # neither y nor a disabled Yes does it
        assert not screen.answer.done() or screen.answer.result() is False
        await pilot.press("escape")
        await until(pilot, lambda: runner.answers == [False], "the runner told no")
        await until(pilot, lambda: "refused" in proposals_text(app), "the refusal shown")


async def test_progress_streams_in_then_the_result_and_a_key_closes() -> None:
    gates = [asyncio.Event(), asyncio.Event()]
    runner = FakeRemediations(
        level_preview(),
        script=[
            "stored level 1; waiting for the gateway to report it",
            gates[0],
            "gateway reports level 1",
            gates[1],
        ],
        result=RemediationResult(
            "verified",
            "the gateway reports level 1 (RAG off, base LLM only)",
            ACTION_ID,
            undo_command=f"oncall remediate rollback {ACTION_ID}",
        ),
    )
    # A non-dangerous proposal next to the dangerous one, on the same step.
    gpu = p99_events()["gpu_memory.result"]
    assert isinstance(gpu, StepResult)
    two = dataclasses.replace(gpu, proposals=(LOWER_SEQS, DEGRADE))
    checklists = FakeChecklists({P99: [two if e == gpu else e for e in p99_script()]})
    app = OncallApp(
        settings(),
        alerts_source=FakeAlerts(board_statuses()),
        checklist_runner=checklists,
        remediation_runner=runner,
        clock=FakeClock(),
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
        await pilot.press("enter")
        await until(pilot, lambda: not app.book.runs[P99].running, "the end of the run")
        incident = app.screen
        assert isinstance(incident, IncidentScreen)
        assert "  2 → gpu_memory: Switch RAG off" in proposals_text(app)
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the modal")
        screen = modal(app)
        assert runner.calls[0][0] == DEGRADE
        assert not yes_disabled(app)  # not dangerous: nothing to type
        assert screen.query_one("#no", Button).has_focus  # but never Yes by default
        await pilot.press("shift+tab", "enter")  # No → Yes, pressed
        await until(pilot, lambda: runner.answers == [True], "the runner told yes")
        await until(pilot, lambda: "stored level 1" in text(screen, "#confirm-progress"), "a line")
        progress = text(screen, "#confirm-progress")
        assert "gateway reports level 1" not in progress and "verified" not in progress
        await pilot.press("escape", "q")  # while it runs, neither closes nor quits
        assert app.screen is screen and app.is_running
        gates[0].set()
        await until(pilot, lambda: "gateway reports" in text(screen, "#confirm-progress"), "line 2")
        assert screen.phase == "running"
        gates[1].set()
        await until(pilot, lambda: screen.phase == "done", "the result")
        progress = text(screen, "#confirm-progress")
        assert "✓ verified: the gateway reports level 1 (RAG off, base LLM only)" in progress
        assert f"audit action {ACTION_ID}" in progress
        assert f"to undo: oncall remediate rollback {ACTION_ID}" in progress
        await pilot.press("x")
        await until(pilot, lambda: app.screen is incident, "the modal closed by a key")
        assert "Last action: ✓ the gateway reports level 1" in proposals_text(app)


async def test_one_remediation_at_a_time_and_planning_shows() -> None:
    planning = asyncio.Event()
    runner = FakeRemediations(seqs_preview(*OK_GUARDS), planning=planning)
    app = make_app(runner)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
        await pilot.press("enter")
        await until(pilot, lambda: not app.book.runs[P99].running, "the end of the run")
        await pilot.press("p")
        await until(pilot, lambda: len(runner.calls) == 1, "the runner called")
        assert "Last action: planning Lower --max-num-seqs to 64" in proposals_text(app)
        await pilot.press("p", "1")  # still planning the first: neither starts another
        await pilot.pause()
        assert len(runner.calls) == 1
        assert isinstance(app.screen, IncidentScreen)
        planning.set()
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the modal")
        await pilot.press("escape")
        await until(pilot, lambda: "declined" in proposals_text(app), "declined")


# -- snapshots ----------------------------------------------------------------------------------


def up(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """Open the modal, press `keys`, and hold the text cursor still for the picture."""

    async def run_before(pilot: Pilot[Any]) -> None:
        screen = await open_modal(pilot)
        for word in screen.query(Input):
            word.cursor_blink = False
        await pilot.press(*keys)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_dangerous_action(snap_compare: Compare, size: tuple[int, int]) -> None:
    app = make_app(FakeRemediations(seqs_preview(*OK_GUARDS)))
    assert snap_compare(app, terminal_size=size, run_before=up("v", "l"))


def test_snapshot_refused_by_the_lease(snap_compare: Compare) -> None:
    app = make_app(FakeRemediations(seqs_preview(*OK_GUARDS, LEASE_HELD)))
    assert snap_compare(app, terminal_size=(80, 24), run_before=up())


def test_snapshot_result(snap_compare: Compare) -> None:
    runner = FakeRemediations(
        seqs_preview(*OK_GUARDS),
        script=["rollout: 1 of 2 updated replicas are available", "rollout: complete"],
    )
    app = make_app(runner)
    assert snap_compare(app, terminal_size=(100, 30), run_before=up(*"vllm", "enter"))


def test_snapshot_no_color(snap_compare: Compare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(FakeRemediations(seqs_preview(*OK_GUARDS, LEASE_HELD)))
    assert app.no_color
    assert snap_compare(app, terminal_size=(80, 24), run_before=up())


# -- LiveRemediations over a stand-in Remediator, on the app's loop ----------------------------


def real_plan() -> Plan:
    return Plan(
        action="set-max-num-seqs",
        params={"deployment": "vllm", "value": 64},
        target=Target("Deployment", "vllm", "ai", UID, "4711"),
        before="--max-num-seqs 256",
        after="--max-num-seqs 64",
        request={"method": "PATCH"},
        dangerous=True,
        confirm_word="vllm",
        undo={"deployment": "vllm", "value": 256},
    )


class StandInRemediator:
    """Records what it is given; `run` asks `confirm` unless a guard refuses up front."""

    made: ClassVar[list[StandInRemediator]] = []
    verdicts: ClassVar[list[GuardVerdict]] = []
    plan_error: ClassVar[str | None] = None

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.thread = threading.get_ident()
        self.still_firing: bool | None = None
        StandInRemediator.made.append(self)

    @classmethod
    def from_settings(cls, settings: Any, **kwargs: Any) -> StandInRemediator:
        return cls(**kwargs)

    async def __aenter__(self) -> StandInRemediator:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        return None

    async def plan(self, action: str, params: dict[str, Any]) -> Plan:
        if self.plan_error:
            raise PlanError(self.plan_error)
        return real_plan()

    async def run(self, plan: Plan, confirm: Any, *, progress: Any = None) -> Outcome:
        preview = Preview(plan, {"server": "ok"}, tuple(self.verdicts))
        refused = preview.refusal
        if refused:
            message = f"refused ({refused.guard})"
            return Outcome(ACTION_ID, "refused", message, plan, preview, refusal=refused)
        if not await confirm(preview):
            return Outcome(ACTION_ID, "declined", "declined: nothing was changed", plan, preview)
        check = self.kwargs["alert_still_firing"]
        self.still_firing = await check() if check else None
        progress("rollout: complete")
        return Outcome(ACTION_ID, "verified", "2/2 pods run --max-num-seqs 64", plan, preview)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> type[StandInRemediator]:
    from oncall.remediation import executor

    StandInRemediator.made = []
    StandInRemediator.verdicts = [GuardVerdict("read-only", True, "not in read-only mode")]
    StandInRemediator.plan_error = None
    monkeypatch.setattr(executor, "Remediator", StandInRemediator)
    return StandInRemediator


async def test_live_remediations_carry_the_preview_answer_and_progress_to_the_app(
    stand_in: type[StandInRemediator],
) -> None:
    app_thread = threading.get_ident()
    seen: list[tuple[str, int]] = []
    firing = status(P99, "firing", value=1.84, firing_for=182)
    latest: list[RuleStatus | None] = [firing]

    async def confirm(preview: Preview) -> bool:
        seen.append((f"confirm {preview.plan.target.label} {preview.plan.target.uid}", 0))
        assert threading.get_ident() == app_thread
        return True

    def progress(line: str) -> None:
        assert threading.get_ident() == app_thread
        seen.append((line, 0))

    gpu = p99_events()["gpu_memory.result"]
    assert isinstance(gpu, StepResult)
    alert = AlertContext(P99, firing, latest=lambda: latest[0])
    runner = LiveRemediations(settings(), read_only_flag=True)
    result = await runner.run(RemediationRequest(LOWER_SEQS, alert, gpu), confirm, progress)

    assert result == RemediationResult(
        "verified",
        "2/2 pods run --max-num-seqs 64",
        ACTION_ID,
        undo_command=f"oncall remediate rollback {ACTION_ID}",
    )
    assert [s for s, _ in seen] == [f"confirm Deployment ai/vllm {UID}", "rollout: complete"]
    (made,) = stand_in.made
    assert made.thread == app_thread  # the remediation ran on the app's own loop
    assert made.kwargs["read_only_flag"] is True
    assert made.kwargs["alert"]["name"] == P99 and made.kwargs["alert"]["state"] == "firing"
    evidence = made.kwargs["evidence"]
    assert evidence["proposal"] == {
        "id": "lower-max-num-seqs",
        "title": "Lower --max-num-seqs to 64",
        "step": "gpu_memory",
    }
    assert evidence["step"]["evidence"][0]["label"] == "GPU memory used (busiest)"
    assert made.still_firing is True

    latest[0] = status(P99, "inactive")  # resolved meanwhile: the re-check says no
    await runner.run(RemediationRequest(LOWER_SEQS, alert, gpu), confirm, progress)
    assert stand_in.made[-1].still_firing is False


async def test_live_remediations_show_a_refused_preview_and_report_the_holder(
    stand_in: type[StandInRemediator],
) -> None:
    stand_in.verdicts = [
        GuardVerdict("lease", False, "bob@ops-2 is acting", {"holder": "bob@ops-2", "since": SINCE})
    ]
    shown: list[Preview] = []

    async def confirm(preview: Preview) -> bool:
        shown.append(preview)
        return True  # ignored: a refused action is never run

    alert = AlertContext(P99, status(P99, "pending"))
    result = await LiveRemediations(settings()).run(
        RemediationRequest(LOWER_SEQS, alert, None), confirm, print
    )
    assert [v.holder for v in shown[0].refused] == ["bob@ops-2"]
    assert result.status == "refused"
    assert result.refusal is not None and result.refusal.holder == "bob@ops-2"
    assert result.refusal.since == SINCE
    assert stand_in.made[0].kwargs["alert_still_firing"] is None  # pending: nothing to re-check
    assert stand_in.made[0].kwargs["evidence"] == {
        "proposal": {
            "id": "lower-max-num-seqs",
            "title": "Lower --max-num-seqs to 64",
            "step": "gpu_memory",
        }
    }


async def test_live_remediations_say_when_an_action_cannot_be_planned(
    stand_in: type[StandInRemediator],
) -> None:
    stand_in.plan_error = "no deployment ai/vllm"

    async def confirm(_preview: Preview) -> bool:
        raise AssertionError("nothing to confirm")

    runner = LiveRemediations(settings())
    result = await runner.run(
        RemediationRequest(LOWER_SEQS, AlertContext(P99), None), confirm, print
    )
    assert result == RemediationResult("not planned", "could not plan: no deployment ai/vllm")
    broken = Proposal("x", "set-max-num-seqs", "x", {}, "gpu_memory", error="value: not a number")
    result = await runner.run(RemediationRequest(broken, AlertContext(P99), None), confirm, print)
    assert result == RemediationResult("not planned", "not actionable: value: not a number")
