"""Issue 29 item 3, acceptance 2: every screen of the app, with escape sequences in every field a
backend supplies, hands the driver no control character but newline and tab.

The backends are the app's service-boundary fakes (tests/tui/fakes.py, the confirm and audit
tests' runners), each answering with hostile text: rule names, labels, annotations, errors and
Alertmanager silences (Prometheus, Alertmanager); step titles, summaries, reasons, evidence,
curl equivalents and proposals (a checklist over backends' facts); the preview of an action
(target, before/after, request, dry run, guards' reasons); audit records and their details.
What is checked is what the compositor hands the driver for the whole terminal (the active
screen over the screens below it, as Textual's own screenshot renders it): the text of every
segment.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from textual.pilot import Pilot

from oncall.model.alertmanager import Acknowledgement, InstanceRouting, RuleRouting, Silence
from oncall.model.alerts import AlertInstance, RuleStatus
from oncall.model.checklist_events import ChecklistPlanned, EvidenceValue, Proposal
from oncall.model.write_path import GuardVerdict, Plan, Preview, Target
from oncall.settings import Settings
from oncall.tui.app import OncallApp
from oncall.tui.audit_screen import AuditScreen
from oncall.tui.confirm import ConfirmScreen
from oncall.tui.help import HelpScreen
from oncall.tui.incident import IncidentScreen
from oncall.tui.silence import SilenceScreen
from tests.tui.chart_fakes import FakeCharts
from tests.tui.fakes import T0, FakeAlerts, FakeChecklists, FakeClock, result, started, status
from tests.tui.test_audit_screen import DEPLOYMENT, FakeAudit, record
from tests.tui.test_confirm import FakeRemediations

#: OSC 0 (window title) and OSC 52 (clipboard write) ended by BEL, ESC[2J, the C1 CSI, NUL,
#: the C1 NEL, a carriage return, a backspace and DEL.
ESCAPES = "\x1b]0;pwned\x07\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x9b31m\x00\x85\r\x08\x7f"


def hostile(field: str) -> str:
    """`field`'s marker, then every escape: the marker shows the field reached the screen."""
    return f"<{field}>{ESCAPES}"


ALERT = "Evil" + hostile("rule")


def controls(text: str) -> list[str]:
    """The characters of text a terminal would act on: C0 but tab and newline, DEL, C1."""
    return [c for c in text if (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0]


def drawn(app: OncallApp) -> str:
    """The text of every segment the compositor hands the driver for the whole terminal."""
    update: Any = app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens
    )
    return "\n".join(
        "".join(segment.text for strip in line for segment in strip if not segment.control)
        for line in update.strips
    )


def hostile_status() -> RuleStatus:
    base = status(ALERT, "firing", value=1.84, firing_for=72)
    silence = Silence(
        "5c3e", "active", created_by=hostile("silence-author"), comment=hostile("silence-comment"),
        starts_at=T0 - 60, ends_at=T0 + 3600,
    )  # fmt: skip
    instance = AlertInstance(
        rule=ALERT, state="firing", labels={"alertname": ALERT, "pod": hostile("label")},
        value=1.84, active_since=T0 - 192, fires_in_s=None, firing_for_s=72,
        last_evaluation=T0, source="prometheus",
        annotations={"summary": hostile("annotation")},
        routing=InstanceRouting("silenced", ("5c3e",), (silence,)),
    )  # fmt: skip
    rule = dataclasses.replace(
        base.rule,
        labels={"severity": "page", "team": hostile("rule-label")},
        annotations={"summary": hostile("rule-summary"), "runbook_url": hostile("url")},
    )
    ack = Acknowledgement(hostile("ack-by"), T0 - 10, hostile("ack-note"))
    routing = RuleRouting(silenced=1, ack=ack)
    return dataclasses.replace(base, rule=rule, instances=(instance,), routing=routing)


def statuses() -> list[RuleStatus]:
    broken = status(
        "Broken" + hostile("rule2"), "unknown", error=hostile("error"), stale_since=T0 - 30
    )
    return [hostile_status(), broken]


PROPOSAL = Proposal(
    id="hostile", action="set-degradation-level", title=hostile("proposal"),
    params={"level": 1}, step="s1",
)  # fmt: skip


def script() -> list[Any]:
    steps = (("s1", hostile("title")), ("s2", hostile("title2")))
    evidence = (
        EvidenceValue(hostile("evidence-label"), hostile("evidence-value"), None, None),
        EvidenceValue("an error", None, None, None, hostile("evidence-error")),
    )
    return [
        ChecklistPlanned(hostile("runbook-path"), steps),
        started("s1", steps[0][1]),
        result(
            "s1",
            steps[0][1],
            "fail",
            hostile("summary"),
            evidence=evidence,
            proposals=(PROPOSAL,),
            equivalent=hostile("equivalent"),
        ),
        started("s2", steps[1][1]),
        result("s2", steps[1][1], "unknown", hostile("reason"), reason=hostile("reason")),
    ]


def preview() -> Preview:
    plan = Plan(
        action="set-degradation-level",
        params={"level": 1},
        target=Target("RedisKey", hostile("target")),
        before=hostile("before"),
        after=hostile("after"),
        request={"command": ["SET", hostile("request"), "1"]},
        dangerous=False,
        confirm_word="yes",
        notes=(hostile("note"),),
    )
    verdicts = (GuardVerdict("lease", True, hostile("guard")),)
    return Preview(plan, {"current": hostile("dry-run")}, verdicts)


class RawAudit(FakeAudit):
    """A record's details as the live service gives them: JSON with `ensure_ascii=False`, so
    the C1 controls and DEL are raw characters in it (C0 are JSON escapes)."""

    async def details(self, key: str) -> str | None:
        found = next((r for r in self.entries if r["id"] == key), None)
        return None if found is None else json.dumps(found, indent=2, ensure_ascii=False)


def audit() -> FakeAudit:
    entries = [
        record(1, "proposed", hostile("audit-action"), {**DEPLOYMENT, "name": hostile("a-t")}),
        record(
            2,
            "refused",
            "rebuild-pod",
            DEPLOYMENT,
            user=hostile("audit-user"),
            guard=hostile("audit-guard"),
            detail={"why": hostile("audit-detail")},
        ),
    ]
    return RawAudit(entries=entries)


def hostile_app() -> OncallApp:
    clock = FakeClock()
    app = OncallApp(
        # An Alertmanager configured: the board's routing column (the fakes answer for it).
        Settings.model_validate({"alertmanager": {"url": "http://127.0.0.1:9"}}),
        alerts_source=FakeAlerts(statuses()),
        checklist_runner=FakeChecklists({ALERT: script()}),
        audit_source=audit(),
        remediation_runner=FakeRemediations(preview()),
        clock=clock,
    )
    app.chart_source = FakeCharts(clock)
    return app


async def check(pilot: Pilot[Any], where: str, *markers: str) -> None:
    """The terminal as drawn now: each marker is on it, disarmed, and no control is."""
    from tests.harness.waiting import until

    app = pilot.app
    assert isinstance(app, OncallApp)
    # Generous: on a loaded machine the board fits its columns to new rows only at idle.
    await until(
        pilot,
        lambda: all(f"<{m}>" in drawn(app) for m in markers),
        f"{where}: {markers}",
        within=60.0,
    )
    screen = drawn(app)
    assert not controls(screen), f"{where}: {sorted(set(controls(screen)))!r}"
    for marker in markers:
        # Each escape shown as "?" (Rich drops BEL, CR and BS from text by itself), or as its
        # JSON escape where the screen shows JSON (a request, a dry run, an audit record).
        shown = (f"<{marker}>?]0;pwned", f"<{marker}>\\u001b]0;pwned")
        assert any(s in screen for s in shown), f"{where}: {marker} not shown as text"


async def test_every_screen_draws_hostile_backend_text_without_a_control_character() -> None:
    from tests.harness.waiting import until

    app = hostile_app()
    async with app.run_test(size=(220, 70)) as pilot:
        await check(pilot, "board", "rule", "rule2", "ack-by")
        await until(pilot, lambda: app.board.selected_alert() == ALERT, "the hostile alert")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident")
        await until(pilot, lambda: not app.book.runs[ALERT].running, "the end of the run")
        await check(
            pilot, "incident", "rule", "title", "summary", "evidence-label", "evidence-value",
            "reason", "proposal", "label", "annotation", "silence-comment", "silence-author",
        )  # fmt: skip
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        await check(pilot, "help over the incident")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident again")
        await pilot.press("s")  # the silence form, pre-filled from the instance's labels
        await until(pilot, lambda: isinstance(app.screen, SilenceScreen), "the silence form")
        await check(pilot, "silence form", "label")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident again")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm modal")
        await check(pilot, "confirm", "target", "before", "after", "guard")
        await pilot.press("d")
        await check(pilot, "confirm details", "request")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), "declined")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.board, "the board again")
        await pilot.press("colon", *"audit", "enter")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen), "the audit screen")
        await check(pilot, "audit", "audit-action", "audit-user")
        await pilot.press("enter")
        await check(pilot, "audit details", "audit-detail")
