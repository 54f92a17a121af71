"""Runbook lint: shipped runbooks clean, each broken sample located exactly, no traceback ever."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncall.checklist.loader import load_runbook, runbook_files
from oncall.checklist.schema import SCHEMA_PATH, schema_text
from tests.cli_runner import run_oncall

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "runbooks"
BROKEN = ROOT / "tests" / "fixtures" / "runbooks" / "broken"
GOOD = RUNBOOKS / "LLMHighP99Latency.yaml"
SCHEMA_LINE = "# yaml-language-server: $schema=../oncall/checklist/runbook.schema.json"


def test_shipped_runbooks_lint_clean() -> None:
    result = run_oncall("runbook", "lint", "runbooks/", cwd=ROOT)
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "clean" in result.stderr


def test_shipped_runbooks_name_the_schema_on_their_first_line() -> None:
    files = runbook_files([RUNBOOKS])
    assert files
    for file in files:
        assert file.read_text().splitlines()[0] == SCHEMA_LINE, file


@pytest.mark.parametrize("sample", sorted(BROKEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_broken_sample_reports_its_expected_problem(sample: Path) -> None:
    expected = sample.read_text().splitlines()[0].removeprefix("# expect: ")
    result = run_oncall("runbook", "lint", sample.name, cwd=BROKEN)
    assert result.code == 1
    assert expected in result.stdout.splitlines(), result.stdout
    assert "Traceback" not in result.stderr


def test_lint_reports_every_file_and_counts_problems() -> None:
    result = run_oncall("runbook", "lint", ".", cwd=BROKEN)
    assert result.code == 1
    files = {line.split(":", 1)[0] for line in result.stdout.splitlines()}
    assert files == {p.name for p in BROKEN.glob("*.yaml")}
    assert f"{len(files)} runbook files" in result.stderr


def test_lint_of_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = run_oncall("runbook", "lint", str(tmp_path / "nope"), cwd=tmp_path)
    assert result.code == 2
    assert "no such file or folder" in result.stderr


def test_committed_schema_matches_the_models() -> None:
    assert SCHEMA_PATH.read_text() == schema_text(), (
        "runbook.schema.json drifted: run `oncall runbook schema > oncall/checklist/"
        "runbook.schema.json`"
    )
    result = run_oncall("runbook", "schema", cwd=ROOT)
    assert result.code == 0
    schema = json.loads(result.stdout)
    step = schema["$defs"]["Step"]
    assert "redis.stats" in step["properties"]["probe"]["enum"]
    assert step["additionalProperties"] is False


_YAML_BITS = [
    "alert: A\n", "title: t\n", "steps:\n", "  - id: s\n", "    probe: redis.stats\n",
    "    expect: facts.hit_ratio > 0.8\n", "    needs: [s]\n", "&a ", "*a", "<<: *a\n", "{", "}",
    "[", "]", ": ", "- ", "'", '"', "\t", "{{ ", " }}", "|\n", ">-\n", "!!python/object ",
    "%YAML 1.1\n", "---\n", "...\n", "\x00", "é", "? ", "#",
]  # fmt: skip


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(st.sampled_from(_YAML_BITS), st.text(string.printable, max_size=12)),
        max_size=30,
    )
)
def test_mangled_yaml_never_raises(tmp_path: Path, pieces: list[str]) -> None:
    path = tmp_path / "mangled.yaml"
    path.write_text("".join(pieces), encoding="utf-8", errors="surrogatepass")
    result = load_runbook(path)
    assert (result.runbook is None) == bool(result.problems)
    for problem in result.problems:
        assert problem.where.startswith(str(path))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_mangled_good_runbook_never_raises(tmp_path: Path, data: st.DataObject) -> None:
    text = GOOD.read_text()
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    insert = data.draw(st.sampled_from(["", *_YAML_BITS]))
    path = tmp_path / "cut.yaml"
    path.write_text(text[:start] + insert + text[end:])
    result = load_runbook(path)
    assert (result.runbook is None) == bool(result.problems)
