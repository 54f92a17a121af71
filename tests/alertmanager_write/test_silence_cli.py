"""`oncall silence add|list|expire` against the real Alertmanager, on a real terminal: the
preview lists the alerts the silence would match, a typed `yes` creates it with the operator
(the Kubernetes identity) as `createdBy`, `expire` ends it, and every step is in the audit log.
Refusals: read-only mode, an answer typed ahead, matchers that match everything."""

from __future__ import annotations

import json
import re

import yaml

from oncall.audit.records import MASK as AUDIT_MASK
from oncall.redaction import MASK as SCREEN_MASK
from tests.alertmanager_write.conftest import OPERATOR, World
from tests.harness.terminal import run_on_terminal
from tests.security.hostile_cli import run_inprocess
from tests.security.test_type_ahead import _typed_ahead


def _transitions(world: World, action: str) -> list[str]:
    return [r["transition"] for r in world.records() if r["action"] == action]


def test_add_previews_the_matched_alerts_then_expire_ends_it(world: World) -> None:
    world.post_alerts({"alertname": "KubePodNotReady", "pod": "vllm-0"},
                      {"alertname": "KubePodNotReady", "pod": "vllm-1"},
                      {"alertname": "Other", "pod": "vllm-0"})  # fmt: skip
    matchers = f'{{alertname="KubePodNotReady", case="{world.case}"}}'
    added = run_on_terminal(
        world.args("silence", "add", matchers, "--for", "1h", "--comment", "rollout of vllm"),
        [("to confirm", "yes")],
    )
    assert added.code == 0, added.output
    assert f'matches {{alertname="KubePodNotReady", case="{world.case}", pod="vllm-0"}}' in (
        added.output
    ), added.output
    assert 'pod="vllm-1"}' in added.output
    assert 'alertname="Other"' not in added.output
    assert "2 alerts match now" in added.output
    [silence] = world.silences()
    assert silence["createdBy"] == OPERATOR
    assert silence["comment"] == "rollout of vllm"
    assert silence["status"]["state"] == "active"
    assert f"silence {silence['id']} active" in added.output
    assert _transitions(world, "silence") == [
        "proposed", "approved", "started", "succeeded", "verified",
    ]  # fmt: skip
    succeeded = next(r for r in world.records() if r["transition"] == "succeeded")
    assert succeeded["outcome"]["silence_id"] == silence["id"]

    listed = run_inprocess(*world.args("silence", "list", "-o", "json"))
    assert listed.code == 0, listed.output
    assert silence["id"] in [s["id"] for s in json.loads(listed.stdout)["silences"]]

    expired = run_on_terminal(
        world.args("silence", "expire", silence["id"]), [("to confirm", "yes")]
    )
    assert expired.code == 0, expired.output
    assert "active until" in expired.output  # the preview's before
    [after] = world.silences()
    assert after["status"]["state"] == "expired"
    assert _transitions(world, "silence-expire") == [
        "proposed", "approved", "started", "succeeded", "verified",
    ]  # fmt: skip


def _add(world: World, *before: str) -> list[str]:
    return world.args(*before, "silence", "add", f'{{case="{world.case}"}}', "--comment", "c")


def _nothing_silenced(world: World, code: int, output: str, said: str, audited: list[str]) -> None:
    assert code == 1, output
    assert said in output, output
    assert world.silences() == []
    assert _transitions(world, "silence") == audited


def test_a_silence_that_matches_nothing_is_flagged(world: World) -> None:
    ran = run_on_terminal(_add(world), [("to confirm", "no")])
    flagged = "0 alerts match now; WARNING: matches NO alert now"
    _nothing_silenced(world, ran.code, ran.output, flagged, ["proposed", "declined"])


def test_read_only_refuses_and_audits(world: World) -> None:
    world.post_alerts({"alertname": "X"})
    ran = run_on_terminal(_add(world, "--read-only"))
    _nothing_silenced(world, ran.code, ran.output, "refused (read-only)", ["proposed", "refused"])


def test_an_answer_typed_ahead_does_not_confirm(world: World) -> None:
    world.post_alerts({"alertname": "X"})
    code, output = _typed_ahead(_add(world), b"yes\n")
    _nothing_silenced(world, code, output, "declined", ["proposed", "declined"])


def test_matchers_that_match_everything_are_refused(world: World) -> None:
    for matchers in ("{}", '{alertname=~".*"}', '{pod!="x", case=~".*"}'):
        ran = run_inprocess(*world.args("silence", "add", matchers, "--comment", "c"))
        assert ran.code == 1, (matchers, ran.output)
        assert "Traceback" not in ran.output
        assert re.search(r"needs label matchers|match every alert", ran.stderr), ran.output
    assert world.records() == []  # not even planned: nothing proposed


def test_a_comment_with_control_characters_or_too_long_is_refused(world: World) -> None:
    for comment in ("\x1b[2J\x1b]0;pwned\x07", "x" * 5000, "a\nb"):
        ran = run_inprocess(*world.args("silence", "add", f'{{case="{world.case}"}}',
                                        "--comment", comment))  # fmt: skip
        assert ran.code == 2, ran.output  # a usage error naming --comment, nothing planned
        assert "argument --comment: " in ran.stderr
        assert "Traceback" not in ran.output
        assert "\x1b" not in ran.output
        assert re.search(r"control characters|at most 500 characters", ran.stderr), ran.stderr
    assert world.silences() == []


def test_the_preview_notes_are_audited_with_secrets_masked(world: World) -> None:
    """The notes (the alerts the silence would match) are cluster data: a label may carry
    anything, a configured token included (a careless exporter's). The proposed record keeps
    the notes the person was shown, the token masked there as on the screen."""
    token = f"am-token-{world.case}"
    config = yaml.safe_load(world.config.read_text())
    config["alertmanager"]["bearer_token"] = token  # Alertmanager itself asks for none
    world.config.write_text(yaml.safe_dump(config))
    world.post_alerts({"alertname": "KubePodNotReady", "leak": token})
    ran = run_inprocess(*_add(world), "--dry-run")
    assert ran.code == 1, ran.output
    shown = [line.removeprefix("  note:    ") for line in ran.stdout.splitlines()
             if line.startswith("  note:")]  # fmt: skip
    assert shown and all(token not in note for note in shown)
    proposed = next(r for r in world.records() if r["transition"] == "proposed")
    assert [note.replace(AUDIT_MASK, SCREEN_MASK) for note in proposed["detail"]["notes"]] == shown
    assert any(f'leak="{AUDIT_MASK}"' in note for note in proposed["detail"]["notes"])
    assert token not in world.audit.read_text()
