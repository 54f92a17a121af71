"""Runbook unit tests, in the shape of `promtool test rules`: recorded facts in, statuses out.

    # runbooks/tests/LLMHighP99Latency.test.yaml
    runbook: ../LLMHighP99Latency.yaml
    tests:
      - name: GPU memory full proposes a lower max-num-seqs
        alert: {state: firing, value: 1.9}
        facts:                       # step id -> the facts its probe would return
          gpu_memory: {max_memory_used_ratio: 0.97, min_memory_free_mib: 2100}
        unreachable:                 # step id -> why its backend did not answer
          redis: "timeout"
        expect:
          steps: {gpu_memory: fail, redis: unknown}    # only the steps listed are checked
          proposals:                 # the exact set of proposal ids; params match partially
            - {id: lower-max-num-seqs, params: {value: 64}}

A step with neither recorded facts nor an `unreachable` entry is `unknown` ("no recorded
facts"), as a backend that never answered would make it. `proposals: []` expects none; leaving
`proposals` out does not check them. Each mismatch is reported as expected-vs-got.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oncall.checklist.compiled import CompiledRunbook, CompiledStep
from oncall.checklist.engine import collect
from oncall.checklist.loader import load_runbook
from oncall.errors import BackendError, Problem
from oncall.model.checklist_events import StepResult, StepStatus
from oncall.settings.yaml_marks import load_marked_yaml

TEST_SUFFIXES = (".test.yaml", ".test.yml")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpectedProposal(_Model):
    id: str
    params: dict[str, Any] = Field(default_factory=dict)


class StepExpectation(_Model):
    status: StepStatus
    summary_contains: str | None = None


class Expect(_Model):
    steps: dict[str, StepStatus | StepExpectation] = Field(default_factory=dict)
    proposals: list[ExpectedProposal] | None = None


class AlertFixture(_Model):
    state: str = "firing"
    value: float | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class RunbookTestCase(_Model):
    name: str
    alert: AlertFixture = Field(default_factory=AlertFixture)
    facts: dict[str, dict[str, Any]] = Field(default_factory=dict)
    unreachable: dict[str, str] = Field(default_factory=dict)
    expect: Expect


class RunbookTestFile(_Model):
    runbook: str
    tests: list[RunbookTestCase] = Field(min_length=1)


@dataclass
class CaseOutcome:
    file: str
    line: int
    name: str
    mismatches: list[str]

    @property
    def passed(self) -> bool:
        return not self.mismatches


@dataclass
class RunbookTestReport:
    outcomes: list[CaseOutcome] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and all(o.passed for o in self.outcomes)


def find_test_files(paths: Sequence[Path]) -> list[Path]:
    """Test files: a test file itself, a runbook's tests/<stem>.test.yaml, a folder's tests/."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            folders = [path, path / "tests"]
            for folder in folders:
                if folder.is_dir():
                    found.extend(
                        sorted(p for p in folder.iterdir() if p.name.endswith(TEST_SUFFIXES))
                    )
        elif path.name.endswith(TEST_SUFFIXES):
            found.append(path)
        else:
            candidate = path.parent / "tests" / f"{path.stem}.test.yaml"
            found.append(candidate)
    return list(dict.fromkeys(found))


def run_tests(paths: Sequence[Path], *, name_filter: str | None = None) -> RunbookTestReport:
    report = RunbookTestReport()
    pattern = re.compile(name_filter) if name_filter else None
    for file in find_test_files(paths):
        report.files += 1
        _run_file(file, pattern, report)
    return report


def alert_facts(name: str, fixture: AlertFixture) -> dict[str, Any]:
    return {
        "name": name,
        "state": fixture.state,
        "value": fixture.value,
        "labels": {"alertname": name, **fixture.labels},
        "annotations": dict(fixture.annotations),
    }


def _run_file(file: Path, pattern: re.Pattern[str] | None, report: RunbookTestReport) -> None:
    doc, problems = load_marked_yaml(file)
    if problems:
        report.problems.extend(problems)
        return
    try:
        spec = RunbookTestFile.model_validate(doc.data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            message = str(error["msg"])
            if error["type"] == "extra_forbidden":
                message = f"unknown key '{loc[-1]}'"
            of_key = error["type"] == "extra_forbidden"
            report.problems.append(doc.problem(loc, message, of_key=of_key))
        return
    runbook_path = (file.parent / spec.runbook).resolve()
    loaded = load_runbook(runbook_path, display=str(file.parent / spec.runbook))
    if loaded.runbook is None:
        report.problems.append(doc.problem(("runbook",), f"runbook {spec.runbook} does not load"))
        report.problems.extend(loaded.problems)
        return
    runbook = loaded.runbook
    step_ids = {s.spec.id for s in runbook.steps}
    for index, case in enumerate(spec.tests):
        for key in ("facts", "unreachable"):
            for step_id in getattr(case, key):
                if step_id not in step_ids:
                    report.problems.append(
                        doc.problem(
                            ("tests", index, key, step_id),
                            f"no step '{step_id}' in {spec.runbook}",
                            of_key=True,
                        )
                    )
        if pattern and not pattern.search(case.name):
            continue
        line = doc.value_at.get(("tests", index))
        results = asyncio.run(_run_case(runbook, case))
        report.outcomes.append(
            CaseOutcome(
                str(file), line.line if line else 1, case.name, _compare(case.expect, results)
            )
        )


async def _run_case(runbook: CompiledRunbook, case: RunbookTestCase) -> list[StepResult]:
    async def recorded(step: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        step_id = step.spec.id
        if step_id in case.unreachable:
            raise BackendError("recorded", step.spec.probe, case.unreachable[step_id])
        if step_id in case.facts:
            return dict(case.facts[step_id])
        raise BackendError("recorded", step.spec.probe, "no recorded facts")

    alert = alert_facts(runbook.spec.alert, case.alert)
    return await collect(runbook, alert, recorded)


def _compare(expect: Expect, results: list[StepResult]) -> list[str]:
    by_id = {r.id: r for r in results}
    mismatches: list[str] = []
    for step_id, wanted in expect.steps.items():
        got = by_id.get(step_id)
        if got is None:
            mismatches.append(f"step {step_id}: no such step in the runbook")
            continue
        expectation = (
            wanted if isinstance(wanted, StepExpectation) else StepExpectation(status=wanted)
        )
        detail = got.reason or got.summary or ""
        if got.status != expectation.status:
            mismatches.append(
                f"step {step_id}: expected {expectation.status}, got {got.status} ({detail})"
            )
        if expectation.summary_contains and expectation.summary_contains not in (got.summary or ""):
            mismatches.append(
                f"step {step_id}: expected summary containing {expectation.summary_contains!r}, "
                f"got {got.summary!r}"
            )
    if expect.proposals is not None:
        proposed = {p.id: p for r in results for p in r.proposals}
        wanted_ids = [p.id for p in expect.proposals]
        if sorted(set(wanted_ids)) != sorted(proposed):
            mismatches.append(
                f"proposals: expected [{', '.join(sorted(set(wanted_ids)))}], "
                f"got [{', '.join(sorted(proposed))}]"
            )
        for item in expect.proposals:
            got_p = proposed.get(item.id)
            if got_p is None:
                continue
            if got_p.error:
                mismatches.append(f"proposal {item.id}: {got_p.error}")
            for key, value in item.params.items():
                if got_p.params.get(key) != value:
                    mismatches.append(
                        f"proposal {item.id} params.{key}: expected {value!r}, "
                        f"got {got_p.params.get(key)!r}"
                    )
    return mismatches
