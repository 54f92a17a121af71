"""The timeline of an incident holds its own episode of each alert: an earlier firing of the
same alert, minutes before, in the `ALERTS` history the draft queries (it looks back 10
minutes for the pending that led to the first firing), is not this incident's."""

from __future__ import annotations

from oncall.incidents.timeline import alert_transitions
from oncall.model.incidents import Member
from oncall.model.metrics import Series

T0 = 1_800_000_000.0
STEP = 5.0


def run(state: str, start: float, end: float) -> Series:
    labels = {"alertname": "LLMHighP99Latency", "alertstate": state}
    count = int((end - start) / STEP) + 1
    return Series(labels, [(start + n * STEP, 1.0) for n in range(count)])


def test_an_earlier_episode_of_the_same_alert_is_left_out() -> None:
    # Earlier: pending 0-10, firing 15-60, resolved. This incident's: pending 200-210, firing
    # 215 (its first firing) to 300.
    series = [
        Series(
            run("pending", 0, 10).labels,
            run("pending", 0, 10).points + run("pending", 200, 210).points,
        ),
        Series(
            run("firing", 15, 60).labels,
            run("firing", 15, 60).points + run("firing", 215, 300).points,
        ),
    ]
    member = Member("", "LLMHighP99Latency", {}, T0 + 215)
    shifted = [Series(s.labels, [(T0 + t, v) for t, v in s.points]) for s in series]
    events, known = alert_transitions(shifted, [member], step=STEP, end=T0 + 400)
    shown = sorted((e.ts - T0, e.kind) for e in events)
    assert shown == [(200, "pending"), (215, "firing"), (305, "resolved")]
    assert known == {member.key}


def test_a_member_with_only_an_earlier_episode_has_no_history_of_this_one() -> None:
    series = [Series(run("firing", T0, T0 + 60).labels, run("firing", T0, T0 + 60).points)]
    member = Member("", "LLMHighP99Latency", {}, T0 + 600)
    events, known = alert_transitions(series, [member], step=STEP, end=T0 + 700)
    assert events == [] and known == set()


def test_a_transition_is_dated_by_the_sample_that_wrote_it_not_the_steps_grid() -> None:
    """A range query at a 5 s step shows the firing at 215, the first grid point after the
    evaluation that wrote it at 211.3 (so after the at-firing verdict it triggered, 212.0);
    the raw samples date it at 211.3. Without them, the grid's time stays."""
    firing = Series(
        run("firing", 215, 300).labels, [(T0 + t, 1.0) for t, _ in run("firing", 215, 300).points]
    )
    written = Series(firing.labels, [(T0 + 211.3 + n, 1.0) for n in range(90)])
    member = Member("", "LLMHighP99Latency", {}, T0 + 211)
    events, _ = alert_transitions([firing], [member], step=STEP, end=T0 + 400, raw=[written])
    assert next((round(e.ts - T0, 1), e.kind) for e in events) == (211.3, "firing")
    events, _ = alert_transitions([firing], [member], step=STEP, end=T0 + 400)
    assert next((round(e.ts - T0, 1), e.kind) for e in events) == (215, "firing")
