"""Threats of item 12 and 13 (issue 12) that need no backend: a typo in `guards.two_person`
that would silently never apply, a level written in non-ASCII digits, and a rollback planned
from an edited audit record."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pydantic
import pytest

from oncall.audit.log import AuditLog
from oncall.model.action_params import SetDegradationLevelParams
from oncall.remediation.action import PlanError
from oncall.remediation.clients import Clients
from oncall.remediation.executor import Remediator
from oncall.remediation.policy import Guards
from oncall.settings import Settings
from tests.cli_runner import run_oncall
from tests.remediation.fakes import FakeBreaker, FakeRate, FakeTwoPerson
from tests.security.hostile_cli import run_inprocess


def test_a_typo_in_two_person_is_a_located_settings_error(tmp_path: Path) -> None:
    config = tmp_path / "oncall.yaml"
    config.write_text("guards:\n  two_person:\n    - rebuild-pod\n    - set-degradation-levl\n")
    result = run_oncall("--config", str(config), "config", "show")
    assert result.code == 2
    assert f"{config}:3:5: guards.two_person: unknown action(s) set-degradation-levl" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("digits", ["٣", "３", "𝟑", "3.0", "0x3"])
def test_non_ascii_digits_are_not_a_level(digits: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="digits 0-9 only"):
        SetDegradationLevelParams.model_validate({"level": digits})
    result = run_oncall("remediate", "set-degradation-level", digits)
    assert result.code == 2
    assert "not a number" in result.stderr and "Traceback" not in result.stderr
    assert SetDegradationLevelParams.model_validate({"level": "3"}).level == 3


ACTION = "0123456789ab"  # an action id as oncall prints them


async def test_a_rollback_is_not_planned_from_an_edited_record(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    target = {"kind": "RedisKey", "name": "ai-gateway:degradation-level"}
    common = {"action_id": ACTION, "action": "set-degradation-level", "target": target}
    log.append(transition="proposed", detail={"undo": {"level": 0}}, **common)
    log.append(transition="verified", outcome={"ok": True}, **common)
    lines = path.read_text().splitlines()
    edited = json.loads(lines[0])
    edited["detail"]["undo"] = {"level": 3}  # "the old value was 3": roll production to 3
    path.write_text("\n".join([json.dumps(edited), *lines[1:]]) + "\n")
    guards = Guards(FakeRate(), FakeBreaker(), FakeTwoPerson())
    async with Remediator(Clients(Settings()), log, guards) as remediator:
        with pytest.raises(PlanError, match="does not verify"):
            await remediator.rollback_plan(ACTION)
    # The command the issue ran: refused before any backend is asked, nothing appended.
    before = path.read_bytes()
    ran = await asyncio.to_thread(
        run_inprocess, "--set", f"audit.path={path}", "--set", "redis.url=redis://127.0.0.1:1/0",
        "remediate", "rollback", ACTION,
    )  # fmt: skip
    assert ran.code == 1, ran.output
    assert "does not verify" in ran.output and "rollback refused" in ran.output
    assert path.read_bytes() == before


NOT_UTF8 = "rebuild-\udcff"  # the byte 0xff, as os.environ and sys.argv hold it


@pytest.mark.parametrize(
    ("where", "flags", "env"),
    [
        ("env ONCALL_GUARDS__TWO_PERSON", [], {"ONCALL_GUARDS__TWO_PERSON": NOT_UTF8}),
        ("flag --set guards.two_person", ["--set", f"guards.two_person={NOT_UTF8}"], {}),
    ],
)
def test_a_value_that_is_not_utf8_is_a_located_settings_error(
    where: str, flags: list[str], env: dict[str, str]
) -> None:
    """A byte that is not UTF-8 in a variable or a flag (the OS hands it over as it is; Python
    keeps it as a lone surrogate) is refused where it came from, not as a traceback from the
    validator that tried to quote it."""
    result = run_oncall(*flags, "config", "show", env=env)
    assert result.code == 2, result.stderr
    assert f"{where}: guards.two_person: not UTF-8 text (an undecodable byte at character 8)" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
