"""`runbook lint`'s budget checks: what would run long, reported before anyone runs it.

A runbook that loads can still ask for more than a step may spend. Each problem is located
(FILE:LINE:COL and key) like the loader's:

- a CEL expression (`when`, `expect`, `warn`, an evidence `value` or `threshold`) whose cost
  bound over lists of `LINT_LIST_LENGTH` elements is past `LINT_COST` (`oncall.checklist.cost`):
  at run time it is evaluated apart and stopped at its step's timeout, its step `unknown`;
- a regular expression with a nested quantifier (`(a+)+`): a `kube.logs` pattern (also given
  through `{{ vars.NAME }}`), a `match:` regex matcher. oncall matches them with RE2 in linear
  time, but the same pattern in grep -P, Python or a log pipeline backtracks for hours.

A file that does not load is not checked here: its problems are the loader's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from oncall.checklist.compiled import CompiledRunbook
from oncall.checklist.cost import LINT_COST, LINT_LIST_LENGTH
from oncall.checklist.expressions import CompiledExpression
from oncall.checklist.loader import load_runbook
from oncall.errors import Problem
from oncall.model.linear_regex import backtracking_risk
from oncall.model.matchers import MatcherError, parse_selection
from oncall.settings.yaml_marks import KeyPath, load_marked_yaml

#: A template that is one `vars` name: `{{ vars.cuda_oom }}`.
_ONE_VAR = re.compile(r"\{\{\s*vars\.([A-Za-z_]\w*)\s*\}\}")
#: Probe parameters that are regular expressions, by probe.
REGEX_PARAMS = {"kube.logs": ("pattern", "skip")}


def budget_problems(path: Path) -> list[Problem]:
    """The budget problems of one runbook file (none when it does not load)."""
    loaded = load_runbook(path)
    if loaded.runbook is None:
        return []
    doc, _ = load_marked_yaml(path)
    return [doc.problem(key, message) for key, message in _findings(loaded.runbook)]


def _findings(runbook: CompiledRunbook) -> Iterator[tuple[KeyPath, str]]:
    spec = runbook.spec
    if spec.match:
        try:
            selection = parse_selection(spec.match, words=False)
        except MatcherError:  # reported by the loader
            selection = None
        for matcher in selection.matchers if selection else ():
            if matcher.op in ("=~", "!~"):
                yield from _regex(("match",), matcher.value)
    for index, step in enumerate(runbook.steps):
        here: KeyPath = ("steps", index)
        for key in ("when", "expect", "warn"):
            expression = getattr(step, key)
            if expression is not None:
                yield from _expression((*here, key), expression)
        for e, item in enumerate(step.evidence):
            yield from _expression((*here, "evidence", e, "value"), item.value)
            if item.threshold is not None:
                yield from _expression((*here, "evidence", e, "threshold"), item.threshold)
        for name in REGEX_PARAMS.get(step.spec.probe, ()):
            value = step.spec.params.get(name)
            if isinstance(value, str):
                one_var = _ONE_VAR.fullmatch(value.strip())
                if one_var and isinstance(spec.vars.get(one_var[1]), str):
                    value = spec.vars[one_var[1]]
                yield from _regex((*here, "params", name), value)


def _expression(key: KeyPath, expression: CompiledExpression) -> Iterator[tuple[KeyPath, str]]:
    cost = expression.shape.estimate(LINT_LIST_LENGTH)
    if cost > LINT_COST:
        yield (
            key,
            (
                f"too costly: {expression.shape.nesting()}, about {cost:.1e} steps over lists of "
                f"{LINT_LIST_LENGTH} (the lint budget is {LINT_COST:.0e}); at run time it is "
                "evaluated apart and stopped at the step's timeout, the step unknown"
            ),
        )


def _regex(key: KeyPath, pattern: str) -> Iterator[tuple[KeyPath, str]]:
    risky = backtracking_risk(pattern)
    if risky:
        yield (
            key,
            (
                f"nested quantifier {risky!r}: catastrophic backtracking in Python re, PCRE or "
                "grep -P (oncall matches it with RE2, in linear time); write it without the "
                "nesting"
            ),
        )
