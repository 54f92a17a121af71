"""Load Prometheus rule files into `AlertRule` values, reporting every problem with its position.

`load_rule_files` reads files and folders (promtool's unit-test files and hidden files in a
folder skipped), `load_rule_text` the PrometheusRule objects read from the cluster; each rule
document is checked as Prometheus' `rulefmt` does by `oncall.alerts.rule_checks`, which says
where this differs from rulefmt and what still loads from a file with problems. Bad files
never raise: they become the `RuleSet`'s problems, in reading order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from oncall.alerts.prometheusrule import unwrap_prometheus_rules, unwrap_text
from oncall.alerts.rule_checks import RuleFileChecker
from oncall.errors import Problem
from oncall.model.alerts import AlertRule

_SUFFIXES = (".yaml", ".yml")
_TEST_SUFFIXES = (".test.yaml", ".test.yml")


@dataclass(frozen=True)
class RuleSet:
    """The alerting rules of some rule files, and everything wrong with those files."""

    rules: list[AlertRule]
    recording: int  # recording rules read and ignored
    files: list[Path]
    problems: list[Problem]


def load_rule_files(paths: Sequence[Path], *, for_scale: float = 1.0) -> RuleSet:
    """Read rule files and folders (their *.yaml and *.yml files, sorted; not recursive).

    In folders, hidden files and promtool unit-test files (*.test.yaml, *.test.yml) are
    skipped; a file named explicitly is always read. `for_s` and `keep_firing_for_s` are
    multiplied by `for_scale`. Bad files never raise: they become `problems`. A `for_scale`
    that is not a positive number is a programming error (ValueError).
    """
    if not (math.isfinite(for_scale) and for_scale > 0):
        raise ValueError(f"for_scale must be a positive number, not {for_scale!r}")
    files, problems = _expand(paths)
    rules: list[AlertRule] = []
    recording = 0
    for file in files:
        for checker in _checkers(file, for_scale):
            checker.check()
            checker.problems.sort(key=_position)
            rules.extend(checker.rules)
            recording += checker.recording
            problems.extend(checker.problems)
    return RuleSet(rules=rules, recording=recording, files=files, problems=problems)


def _expand(paths: Sequence[Path]) -> tuple[list[Path], list[Problem]]:
    files: list[Path] = []
    problems: list[Problem] = []
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found = sorted(
                child
                for child in path.iterdir()
                if child.is_file()
                and child.name.endswith(_SUFFIXES)
                and not child.name.endswith(_TEST_SUFFIXES)
                and not child.name.startswith(".")
            )
            if not found:
                message = "no rule files (*.yaml, *.yml) here"
                problems.append(Problem(str(path), None, None, "", message))
        elif path.exists():
            found = [path]
        else:
            problems.append(Problem(str(path), None, None, "", "no such file or folder"))
            continue
        for file in found:
            if file.resolve() not in seen:
                seen.add(file.resolve())
                files.append(file)
    return files, problems


def load_rule_text(text: str, display: str, *, for_scale: float = 1.0) -> RuleSet:
    """The rules of PrometheusRule objects given as YAML text (read from the cluster): as
    `load_rule_files`, problems located in that text and named `display`."""
    rules: list[AlertRule] = []
    recording, problems = 0, []
    for document in unwrap_text(text, display) or []:
        checker = RuleFileChecker(Path(display), for_scale, document)
        checker.file = display
        checker.check()
        rules.extend(checker.rules)
        recording += checker.recording
        problems.extend(sorted(checker.problems, key=_position))
    return RuleSet(rules=rules, recording=recording, files=[], problems=problems)


def _checkers(file: Path, for_scale: float) -> list[RuleFileChecker]:
    """One checker per rule document of the file: the file itself, or each PrometheusRule
    object in it (see `oncall.alerts.prometheusrule`)."""
    documents = unwrap_prometheus_rules(file, str(file))
    if documents is None:
        return [RuleFileChecker(file, for_scale)]
    return [RuleFileChecker(file, for_scale, document) for document in documents]


def _position(problem: Problem) -> tuple[int, int]:
    """(line, col) of a problem in its file, for reading order; (0, 0) when it has none."""
    return (problem.line or 0, problem.col or 0)
