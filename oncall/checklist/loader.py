"""Load and lint runbooks: every problem as FILE:LINE:COL with its key, never a traceback.

`load_runbook` validates a file against the models of `runbook.py`, then checks what a schema
cannot: step ids unique, `needs` naming existing steps without cycles, `steps.X` used only
when X is in `needs`, proposals naming defined remediations, probes that exist (with a
suggestion), probe and action parameters that those take, and every CEL expression and
template compiled against the names it may use (an error's column points into the expression
when the YAML scalar is on one line).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from oncall.checklist.absence import lint_warnings
from oncall.checklist.compiled import (
    CompiledEvidence,
    CompiledRemediation,
    CompiledRunbook,
    CompiledStep,
)
from oncall.checklist.expressions import CompiledExpression, ExpressionError, compile_expression
from oncall.checklist.graph import find_cycle, topological
from oncall.checklist.runbook import MAX_TIMEOUT_S, Evidence, Remediation, Runbook, Step
from oncall.checklist.templates import Template, compile_template
from oncall.errors import Problem
from oncall.model.matchers import MatcherError, parse_selection
from oncall.probes.registry import all_probes, find_probe
from oncall.settings.yaml_marks import KeyPath, MarkedDocument, Position, load_marked_yaml

#: Names usable per kind of expression (see runbook.py).
JUDGE_NAMES = ("alert", "vars", "facts", "steps")
GATE_NAMES = ("alert", "vars", "steps")
_STEP_REF = re.compile(r"\bsteps\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*['\"]([^'\"]+)['\"])")

Compiled = TypeVar("Compiled")


@dataclass
class LoadResult:
    runbook: CompiledRunbook | None
    problems: list[Problem] = field(default_factory=list)
    #: What loads but deserves a look (`runbook lint` prints them; they fail nothing), e.g.
    #: an expectation that says ok on missing data (`oncall.checklist.absence`).
    warnings: list[Problem] = field(default_factory=list)


def runbook_files(paths: Sequence[Path]) -> list[Path]:
    """The runbook files under paths: files as given, folders' *.yaml/*.yml (not tests)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                sorted(
                    p
                    for p in path.iterdir()
                    if p.suffix in (".yaml", ".yml")
                    and not p.name.startswith(".")
                    and not p.name.endswith((".test.yaml", ".test.yml"))
                )
            )
        else:
            found.append(path)
    return found


def load_runbook(path: Path, display: str | None = None) -> LoadResult:
    """Load one runbook; `runbook` is None when any problem was found."""
    doc, problems = load_marked_yaml(path, display)
    if problems:
        return LoadResult(None, problems)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):  # read fine a moment ago; be safe anyway
        lines = []
    checker = _Checker(doc, lines)
    try:
        spec = Runbook.model_validate(doc.data)
    except ValidationError as exc:
        for error in exc.errors():
            checker.pydantic_problem(error, ())
        return LoadResult(None, checker.problems)
    compiled = checker.compile(spec)
    if checker.problems:
        return LoadResult(None, checker.problems)
    warnings = lint_warnings(doc, spec, compiled) if compiled is not None else []
    return LoadResult(compiled, [], warnings)


class _Checker:
    def __init__(self, doc: MarkedDocument, lines: list[str]) -> None:
        self.doc = doc
        self.lines = lines
        self.problems: list[Problem] = []

    # -- reporting -------------------------------------------------------------------------

    def add(
        self, path: KeyPath, message: str, *, of_key: bool = False, column: int | None = None
    ) -> None:
        pos = self.doc.position(path, of_key=of_key)
        if column is not None and path in self.doc.value_at:
            pos = self._inside(path, column) or pos
        self.problems.append(self.doc.at(pos, ".".join(map(str, path)), message))

    def _inside(self, path: KeyPath, column: int) -> Position | None:
        """The position of a column inside a one-line scalar (quoted or plain)."""
        pos = self.doc.value_at[path]
        if not 0 < pos.line <= len(self.lines):
            return None
        line = self.lines[pos.line - 1]
        first = line[pos.col - 1 : pos.col]
        if first in ("|", ">"):
            return None
        offset = 1 if first in ("'", '"') else 0
        return Position(pos.line, pos.col + offset + column - 1)

    def pydantic_problem(
        self, error: Mapping[str, Any], prefix: KeyPath, model: type[BaseModel] | None = None
    ) -> None:
        loc = (*prefix, *error["loc"])
        kind = error["type"]
        if kind == "extra_forbidden":
            known = list(model.model_fields) if model else _known_fields(loc)
            hint = difflib.get_close_matches(str(loc[-1]), known, n=1)
            suffix = f"; did you mean '{hint[0]}'?" if hint else ""
            self.add(loc, f"unknown key '{loc[-1]}'{suffix}", of_key=True)
            return
        message = str(error["msg"]).removeprefix("Value error, ")
        value = error.get("input")
        if kind == "missing":
            message = f"required key '{loc[-1]}' is missing"
            self.add(loc[:-1], message)
            return
        if isinstance(value, str | int | float | bool) and "invalid duration" not in message:
            message = f"{message} (got {value!r})"
        self.add(loc, message)

    # -- compiling -------------------------------------------------------------------------

    def compile(self, spec: Runbook) -> CompiledRunbook | None:
        self._check_match(spec)
        ids = [step.id for step in spec.steps]
        seen: set[str] = set()
        for index, step_id in enumerate(ids):
            if step_id in seen:
                self.add(("steps", index, "id"), f"step id '{step_id}' is used twice")
            seen.add(step_id)
        self._check_needs(spec)
        steps = [self._step(spec, i, s) for i, s in enumerate(spec.steps)]
        remediations = {
            rid: CompiledRemediation(rid, r, self._remediation_params(rid, r))
            for rid, r in spec.remediations.items()
        }
        if self.problems or any(s is None for s in steps):
            return None
        compiled = [s for s in steps if s is not None]
        ordered = topological(compiled, key=lambda s: s.spec.id, needs=lambda s: s.spec.needs)
        return CompiledRunbook(self.doc.file, spec, tuple(ordered), remediations)

    def _check_match(self, spec: Runbook) -> None:
        """`alert` or `match` (Prometheus label matchers, at least one) must be given."""
        if spec.match is None:
            if not spec.alert:
                self.add(("alert",), "a runbook needs 'alert' (the alert's name) or 'match'")
            return
        try:
            selection = parse_selection(spec.match, words=False)
        except MatcherError as exc:
            self.add(("match",), f"match: {exc}")
            return
        if not selection.matchers:
            self.add(("match",), 'match needs label matchers such as alertname="KubePodNotReady"')

    def _check_needs(self, spec: Runbook) -> None:
        ids = {step.id for step in spec.steps}
        graph: dict[str, list[str]] = {}
        for index, step in enumerate(spec.steps):
            graph[step.id] = []
            for n, need in enumerate(step.needs):
                path = ("steps", index, "needs", n)
                if need == step.id:
                    self.add(path, f"step '{step.id}' needs itself")
                elif need not in ids:
                    hint = difflib.get_close_matches(need, sorted(ids), n=1)
                    suffix = f"; did you mean '{hint[0]}'?" if hint else ""
                    self.add(path, f"no step '{need}'{suffix}")
                else:
                    graph[step.id].append(need)
            for p, rid in enumerate(step.propose):
                if rid not in spec.remediations:
                    hint = difflib.get_close_matches(rid, sorted(spec.remediations), n=1)
                    suffix = f"; did you mean '{hint[0]}'?" if hint else ""
                    self.add(("steps", index, "propose", p), f"no remediation '{rid}'{suffix}")
        cycle = find_cycle(graph)
        if cycle:
            index = next(i for i, s in enumerate(spec.steps) if s.id == cycle[0])
            self.add(("steps", index, "needs"), "needs form a cycle: " + " -> ".join(cycle))

    def _expression(
        self, path: KeyPath, text: str, names: Sequence[str], needs: Sequence[str] | None
    ) -> CompiledExpression | None:
        return self._compiled(compile_expression, path, text, names, needs)

    def _template(
        self, path: KeyPath, text: str, names: Sequence[str], needs: Sequence[str] | None
    ) -> Template | None:
        return self._compiled(compile_template, path, text, names, needs)

    def _compiled(
        self,
        compile_text: Callable[..., Compiled],
        path: KeyPath,
        text: str,
        names: Sequence[str],
        needs: Sequence[str] | None,
    ) -> Compiled | None:
        """`text` compiled, or None with the problem recorded at `path` (and its column)."""
        try:
            compiled = compile_text(text, names=names)
        except ExpressionError as exc:
            self.add(path, exc.message, column=exc.column)
            return None
        self._check_step_refs(path, text, needs)
        return compiled

    def _check_step_refs(self, path: KeyPath, text: str, needs: Sequence[str] | None) -> None:
        if needs is None:
            return
        for match in _STEP_REF.finditer(text):
            ref = match.group(1) or match.group(2)
            if ref not in needs:
                self.add(
                    path,
                    f"uses steps.{ref}, but '{ref}' is not in this step's needs",
                    column=match.start() + 1,
                )

    def _step(self, spec: Runbook, index: int, step: Step) -> CompiledStep | None:
        base: KeyPath = ("steps", index)
        probe = find_probe(step.probe)  # its family's modules only: a cold check imports less
        if probe is None:
            probes = all_probes()
            hint = difflib.get_close_matches(step.probe, sorted(probes), n=1)
            suffix = (
                f"; did you mean '{hint[0]}'?" if hint else f" (known: {', '.join(sorted(probes))})"
            )
            self.add((*base, "probe"), f"unknown probe '{step.probe}'{suffix}")
        needs = step.needs
        params = self._params(
            (*base, "params"), step.params, probe.params if probe else None, GATE_NAMES, needs
        )
        when = (
            self._expression((*base, "when"), step.when, GATE_NAMES, needs) if step.when else None
        )
        expect = (
            self._expression((*base, "expect"), step.expect, JUDGE_NAMES, needs)
            if step.expect is not None
            else None
        )
        warn = (
            self._expression((*base, "warn"), step.warn, JUDGE_NAMES, needs) if step.warn else None
        )
        summary = (
            self._template((*base, "summary"), step.summary, JUDGE_NAMES, needs)
            if step.summary
            else None
        )
        evidence: list[CompiledEvidence] = []
        for e, item in enumerate(step.evidence):
            path = (*base, "evidence", e)
            value = self._expression((*path, "value"), _text(item.value), JUDGE_NAMES, needs)
            threshold = (
                self._expression((*path, "threshold"), _text(item.threshold), JUDGE_NAMES, needs)
                if item.threshold is not None
                else None
            )
            if value is not None:
                evidence.append(CompiledEvidence(item.label, value, threshold, item.unit, item.bad))
        timeout = step.timeout if step.timeout is not None else (probe.timeout if probe else 5.0)
        if timeout <= 0 or timeout > MAX_TIMEOUT_S:
            self.add((*base, "timeout"), f"timeout must be within (0, {MAX_TIMEOUT_S:g}s]")
        for p, rid in enumerate(step.propose):
            remediation = spec.remediations.get(rid)
            for key, value in (remediation.params if remediation else {}).items():
                if isinstance(value, str):
                    for match in _STEP_REF.finditer(value):
                        ref = match.group(1) or match.group(2)
                        if ref not in needs:
                            self.add(
                                (*base, "propose", p),
                                f"remediation '{rid}' uses steps.{ref} (params.{key}), "
                                f"but '{ref}' is not in this step's needs",
                            )
        if probe is None or (step.expect is not None and expect is None) or params is None:
            return None
        return CompiledStep(
            step, probe, float(timeout), params, when, expect, warn, summary, tuple(evidence)
        )

    def _remediation_params(
        self, rid: str, remediation: Remediation
    ) -> dict[str, Template | object]:
        from oncall.model.action_params import ACTION_PARAMS  # a runbook without one: not

        model = ACTION_PARAMS[remediation.action]
        params = self._params(
            ("remediations", rid, "params"), remediation.params, model, JUDGE_NAMES, None
        )
        return params or {}

    def _params(
        self,
        path: KeyPath,
        raw: Mapping[str, Any],
        model: type[BaseModel] | None,
        names: Sequence[str],
        needs: Sequence[str] | None,
    ) -> dict[str, Template | object] | None:
        """Compile string values as templates; validate key names and literal value types."""
        out: dict[str, Template | object] = {}
        literal: dict[str, Any] = {}
        ok = True
        for key, value in raw.items():
            if isinstance(value, str) and "{{" in value:
                template = self._template((*path, key), value, names, needs)
                ok = ok and template is not None
                out[key] = template
            else:
                out[key] = value
                literal[key] = value
        if model is not None:
            try:
                model.model_validate({**{k: _placeholder(model, k) for k in raw}, **literal})
            except ValidationError as exc:
                for error in exc.errors():
                    templated = bool(error["loc"]) and error["loc"][0] not in literal
                    if templated and error["type"] not in ("extra_forbidden", "missing"):
                        continue  # a template's type is checked when it is evaluated
                    if error["type"] == "missing":
                        self.add(path, f"required parameter '{error['loc'][0]}' is missing")
                        ok = False
                        continue
                    self.pydantic_problem(error, path, model)
                    ok = False
        return out if ok else None


def _text(expression: str | float) -> str:
    """An evidence value or threshold as CEL: numbers given in YAML become number literals."""
    if isinstance(expression, bool) or not isinstance(expression, int | float):
        return str(expression)
    return repr(float(expression))


def _placeholder(model: type[BaseModel], key: str) -> object:
    """A value of the field's type standing in for a template, so only literals are judged."""
    info = model.model_fields.get(key)
    if info is None:
        return None
    annotation = str(info.annotation)
    if "int" in annotation:
        return 1
    if "float" in annotation:
        return 1.0
    if "bool" in annotation:
        return False
    return "x"


def _known_fields(loc: KeyPath) -> list[str]:
    """Field names of the model that holds the last key of loc."""
    owners: dict[str, type[BaseModel]] = {
        "steps": Step,
        "evidence": Evidence,
        "remediations": Remediation,
    }
    for part in reversed(loc[:-1]):
        if isinstance(part, str) and part in owners:
            return list(owners[part].model_fields)
    return list(Runbook.model_fields)
