"""A backend's text with escape sequences in it reaches the board as text, never as a command
to the operator's terminal: a hostile or broken Prometheus could name a rule, or word a
warning or an error, so as to clear the screen (and the production banner with it), set the
window title or write the clipboard (OSC 52). Checked on what the compositor hands the
driver, the bytes the terminal would get."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from oncall.redaction import RedactingStream, terminal_safe
from oncall.tui.app import OncallApp
from tests.cli_runner import run_oncall
from tests.harness.waiting import until
from tests.tui.fakes import FakeAlerts, make_app, status

#: CSI clear-screen, OSC 52 clipboard write ended by BEL, a C1 CSI, a carriage return.
HOSTILE = "Ok\x1b[2J\x1b]52;c;ZWNobyBwd25lZA==\x07\x9b31m\rX"
CONTROLS = ("\x1b", "\x07", "\x9b", "\r")


def painted(app: OncallApp) -> str:
    """Every segment's text the compositor renders for the screen."""
    return "".join(seg.text for strip in app.screen._compositor.render_strips() for seg in strip)


def test_terminal_safe_replaces_what_a_terminal_acts_on_and_keeps_the_rest() -> None:
    assert terminal_safe(HOSTILE) == "Ok?[2J?]52;c;ZWNobyBwd25lZA==??31m?X"
    assert terminal_safe("tab\there\nnext line · ünïcode ✓") == "tab\there\nnext line · ünïcode ✓"
    assert terminal_safe("\x00\x7f\x85") == "???"


@pytest.mark.parametrize("where", ["name", "error", "warning"])
async def test_a_hostile_rule_name_error_or_warning_is_shown_disarmed(where: str) -> None:
    name = f"Rule{HOSTILE}" if where == "name" else "RuleOk"
    error = f"prometheus said {HOSTILE}" if where == "error" else None
    stale = 0.0 if where == "error" else None
    alerts = FakeAlerts([status(name, "firing", value=1.0, error=error, stale_since=stale)])
    if where == "warning":
        alerts.warned = (f"store {HOSTILE}",)
    app = make_app(alerts)
    async with app.run_test(size=(200, 24)) as pilot:
        shown = {"name": "RuleOk", "error": "prometheus said Ok", "warning": "store Ok"}[where]
        await until(pilot, lambda: shown in painted(app), "the hostile text, shown")
        screen = painted(app)
        assert not [c for c in CONTROLS if c in screen], repr(screen)
        assert f"{shown}?[2J?]52;c;" in screen  # shown as text, every character accounted for


def test_a_headless_command_prints_a_hostile_rule_name_as_text(tmp_path: Path) -> None:
    """`oncall alerts` (Prometheus down: the local rule is listed as unknown, with its name)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        'groups:\n- name: g\n  rules:\n  - alert: "Bad\\e[2J\\e]0;pwned\\aName"\n'
        "    expr: vector(1) > 0\n    labels: {severity: page}\n"
    )
    config = tmp_path / "oncall.yaml"
    config.write_text(
        '{"prometheus": {"url": "http://127.0.0.1:9", "timeout": "1s"},'
        f' "alerts": {{"packs": [], "files": ["{rules}"]}}}}'
    )
    result = run_oncall("alerts", "--config", str(config), cwd=tmp_path)
    assert result.code == 3, result.stderr  # Prometheus unreachable: the answer is incomplete
    assert "Bad?[2J?]0;pwned?Name" in result.stdout
    assert not [c for c in CONTROLS if c in result.stdout + result.stderr]


def test_the_redacting_stream_disarms_controls_and_keeps_lines() -> None:
    sink = io.StringIO()
    stream = RedactingStream(sink)
    stream.write(f"one {HOSTILE}\ntwo\tcolumns\npartial \x1b[0m")
    stream.flush()
    assert sink.getvalue() == f"one {terminal_safe(HOSTILE)}\ntwo\tcolumns\npartial ?[0m"
