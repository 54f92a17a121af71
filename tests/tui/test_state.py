"""The app's book-keeping without a screen: order, when checklists start, findings text."""

from __future__ import annotations

from oncall.model.checklist_events import StepStatus
from oncall.tui.board import findings_colour
from oncall.tui.format import duration, number, short_age
from oncall.tui.state import (
    AUTO_RUN_EVERY_S,
    AUTO_RUN_STATES,
    AlertBook,
    ChecklistRun,
    RunFailure,
)
from tests.tui.fakes import P99, T0, board_statuses, p99_events, result, status


def test_order_is_firing_then_pending_then_the_rest_in_pack_order() -> None:
    book = AlertBook()
    book.update(board_statuses(), T0)
    assert [(s.rule.name, s.state) for s in book.ordered()] == [
        (P99, "firing"),
        ("AIServiceUnavailable", "pending"),
        ("VectorSearchP999High", "inactive"),
        ("PromptRejectionRateHigh", "unknown"),
        ("LLMOutOfMemory", "inactive"),
    ]


def test_an_alert_becoming_firing_is_due_once_then_not_again_within_a_minute() -> None:
    book = AlertBook()
    book.update([status(P99, "pending")], T0)
    assert book.due(T0) == []
    book.update([status(P99, "firing")], T0 + 5)
    assert book.due(T0 + 5) == [P99]
    run = book.start_run(P99, T0 + 5, auto=True)
    assert book.due(T0 + 6) == []
    run.finished_at = T0 + 7
    # It flaps: pending, then firing again 20 s after the run started.
    book.update([status(P99, "pending")], T0 + 10)
    book.update([status(P99, "firing")], T0 + 25)
    assert book.due(T0 + 25) == []
    # Still wanted: it starts once the minute since the last automatic start is over.
    assert book.due(T0 + 5 + AUTO_RUN_EVERY_S) == [P99]


def test_with_auto_run_pending_a_pending_alert_is_due_and_firing_is_due_again() -> None:
    book = AlertBook(auto_run_states=AUTO_RUN_STATES["pending"], auto_run_every_s=10)
    book.update([status(P99, "inactive")], T0)
    assert book.due(T0) == []
    book.update([status(P99, "pending")], T0 + 1)
    assert book.due(T0 + 1) == [P99]
    book.start_run(P99, T0 + 1, auto=True).finished_at = T0 + 2
    book.update([status(P99, "pending")], T0 + 20)
    assert book.due(T0 + 20) == []  # still pending: nothing new to look at
    book.update([status(P99, "firing")], T0 + 30)
    assert book.due(T0 + 30) == [P99]  # it fired: evidence again


def test_the_auto_run_interval_is_the_books_setting() -> None:
    book = AlertBook(auto_run_every_s=10)
    book.update([status(P99, "firing")], T0)
    book.start_run(P99, T0, auto=True).finished_at = T0 + 1
    book.update([status(P99, "inactive")], T0 + 2)
    book.update([status(P99, "firing")], T0 + 3)
    assert book.due(T0 + 9) == []
    assert book.due(T0 + 10) == [P99]


def test_with_auto_run_off_nothing_starts_by_itself() -> None:
    book = AlertBook(auto_run_states=AUTO_RUN_STATES["off"])
    book.update([status(P99, "pending")], T0)
    book.update([status(P99, "firing")], T0 + 5)
    assert book.due(T0 + 500) == []


def test_a_firing_alert_that_stays_firing_does_not_run_again_by_itself() -> None:
    book = AlertBook()
    book.update([status(P99, "firing")], T0)
    book.start_run(P99, T0, auto=True).finished_at = T0 + 1
    book.update([status(P99, "firing")], T0 + 300)
    assert book.due(T0 + 300) == []


def test_one_run_per_alert_at_a_time() -> None:
    book = AlertBook()
    book.update([status(P99, "firing")], T0)
    book.start_run(P99, T0 - 100, auto=False)  # opened by hand, still running
    assert book.due(T0 + 120) == []


def test_an_alert_that_resolves_before_its_turn_is_no_longer_due() -> None:
    book = AlertBook()
    book.update([status(P99, "firing")], T0)
    book.update([status(P99, "inactive")], T0 + 5)
    assert book.due(T0 + 5) == []


def test_a_replaced_run_is_not_current_any_more() -> None:
    book = AlertBook()
    first = book.start_run(P99, T0, auto=False)
    second = book.start_run(P99, T0 + 1, auto=False)
    assert book.current(P99, first.generation) is None
    assert book.current(P99, second.generation) is second


def test_steps_keep_the_runbook_order_and_findings_count_what_needs_attention() -> None:
    events = p99_events()
    run = ChecklistRun(P99, 1, T0)
    assert run.findings() == "running…"
    for name in ("planned", "kv_cache.started", "kv_cache.result", "gpu_memory.started"):
        run.apply(events[name])
    assert [(v.id, v.state) for v in run.steps()] == [
        ("gpu_memory", "running"),
        ("deployment", "queued"),
        ("token_rate", "queued"),
        ("kv_cache", "fail"),
    ]
    for name in ("gpu_memory.result", "deployment.result", "token_rate.result"):
        run.apply(events[name])
    run.finished_at = T0 + 6
    assert run.findings() == "2 fail · 1 unknown"


def test_a_run_that_failed_before_any_step_says_why_in_short() -> None:
    run = ChecklistRun(
        P99, 1, T0, finished_at=T0, error="no runbook for …", error_short="no runbook"
    )
    assert run.findings() == "no runbook"


def test_formats() -> None:
    assert [duration(s) for s in (None, 0.4, 42, 72, 3725)] == ["", "0s", "42s", "1m12s", "1h02m"]
    assert [short_age(s) for s in (40, 130, 7300)] == ["40s", "2m", "2h"]
    assert [number(v) for v in (None, 0.972, 1200, 123456.0, True)] == [
        "n/a",
        "0.972",
        "1,200",
        "123,456",
        "true",
    ]


def test_the_findings_colour_comes_from_the_worst_status_and_the_runs_end() -> None:
    def ended(*statuses: StepStatus, failure: RunFailure | None = None) -> ChecklistRun:
        run = ChecklistRun(P99, 1, T0, finished_at=T0 + 1, error=failure, error_short=failure)
        for index, step_status in enumerate(statuses):
            run.apply(result(f"s{index}", "step", step_status, "…"))
        return run

    assert findings_colour(ChecklistRun(P99, 1, T0)) == "primary"
    assert [run.worst() for run in (ended(), ended("ok", "warn", "unknown"))] == [None, "unknown"]
    assert findings_colour(ended("ok", "fail", "warn")) == "error"
    assert findings_colour(ended("ok", "error")) == "error"
    assert findings_colour(ended("ok", "unknown")) == "warning"
    assert findings_colour(ended("ok", "warn", "skipped")) == "warning"
    assert findings_colour(ended("ok", "skipped")) == "success"
    assert findings_colour(ended(failure="no runbook")) == "error"
    assert findings_colour(ended(failure="runbook invalid")) is None
    assert findings_colour(ended("ok", failure="error")) == "error"
    assert findings_colour(ended("warn", failure="runbook invalid")) == "warning"
    assert findings_colour(ended("ok", failure="runbook invalid")) is None
