"""No false green: a step whose verdict reads facts its probe could not see is `unknown`.

A probe that looks for series and finds none says so in its facts: `absent`, a mapping from
each fact it could not see to the reason ("no vllm:kv_cache_usage_perc series; found
ray_vllm:kv_cache_usage_perc — a Ray Serve deployment?"). Such a fact is null, and a null
must not read as healthy: `facts.kv_cache_usage == null || …` would say `ok` about a cache
nobody measured. So the engine asks `absent_reasons` which of the facts the step's verdict
reads are absent; if any are, an `ok` (or an expression that fails on the nulls) becomes
`unknown` with the probe's reasons, unless the step says why absence is healthy
(`absent_ok: <reason>`, shown with the result). A `warn` or `fail` stands: it was reached on
facts that are there, and it is not a green.

The facts a verdict reads are its `facts.NAME` and `facts['NAME']` references in `expect` and
`warn`; a step with neither (it only gathers) is read through its summary and evidence.

`null_pass_warnings` is the lint side: an `expect` that holds when every fact it reads is null
shows `ok` on missing data. It is a warning unless the step has `absent_ok`, or its probe
reports the absence of every fact the expectation reads (`Probe.absent_facts`: then a missing
series makes the step unknown anyway, and a null left over is a value the series did not
give, such as no P99 without traffic).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from oncall.checklist.compiled import CompiledRunbook, CompiledStep
from oncall.checklist.expressions import _STRING, ExpressionError
from oncall.checklist.runbook import Runbook
from oncall.errors import Problem
from oncall.settings.yaml_marks import MarkedDocument

#: The facts key where probes list what they could not see: fact name -> reason.
ABSENT_KEY = "absent"

_FIELD = re.compile(r"(?<![.\w])facts\s*\.\s*([A-Za-z_]\w*)")
_INDEX = re.compile(r"""(?<![.\w])facts\s*\[\s*(?:'([^'\\]+)'|"([^"\\]+)")\s*\]""")


def facts_in(text: str) -> set[str]:
    """The top-level fact names an expression or template text references."""
    # `facts.x` inside a string literal is text, not a reference: blank the strings first
    # (same length, so nothing else moves); the index form needs its string, so it is read
    # from the text as written.
    plain = _STRING.sub(lambda m: " " * len(m.group()), text)
    names = set(_FIELD.findall(plain))
    names.update(a or b for a, b in _INDEX.findall(text))
    return names


def facts_read(step: CompiledStep) -> set[str]:
    """The facts the step's verdict reads: its expect and warn, else (a step that only gathers
    facts) its summary and evidence."""
    texts = [e.text for e in (step.expect, step.warn) if e is not None]
    if not texts:
        if step.summary is not None:
            texts.append(step.summary.text)
        for item in step.evidence:
            texts.append(item.value.text)
            if item.threshold is not None:
                texts.append(item.threshold.text)
    return set().union(*(facts_in(text) for text in texts)) if texts else set()


def absent_reasons(step: CompiledStep, facts: Mapping[str, Any]) -> list[str]:
    """The probe's reasons for the facts this step reads and the probe could not see; the
    same reason once, in the order of the facts' names."""
    absent = facts.get(ABSENT_KEY)
    if not isinstance(absent, Mapping) or not absent:
        return []
    reasons = [str(absent[name]) for name in sorted(facts_read(step) & set(absent))]
    return list(dict.fromkeys(reasons))


def passes_on_null(step: CompiledStep, names: Mapping[str, Any]) -> list[str] | None:
    """The facts the expectation reads when it holds with every one of them null; None when
    it does not hold (false, an error, or an expression that needs more than facts)."""
    if step.expect is None:
        return None
    read = sorted(facts_in(step.expect.text))
    if not read:
        return None
    try:
        verdict = step.expect.evaluate({**names, "facts": dict.fromkeys(read)})
    except ExpressionError:
        return None
    return read if verdict is True else None


def null_pass_warnings(
    steps: Iterable[tuple[int, CompiledStep]], names: Mapping[str, Any]
) -> list[tuple[int, str]]:
    """(step index, message) for each expectation that says `ok` on missing data."""
    out: list[tuple[int, str]] = []
    for index, step in steps:
        if step.spec.absent_ok is not None:
            continue
        read = passes_on_null(step, names)
        if read is None:
            continue
        unguarded = [name for name in read if name not in step.probe.absent_facts]
        if not unguarded:
            continue
        listed = ", ".join(f"facts.{name}" for name in unguarded)
        out.append(
            (
                index,
                f"expect holds when {listed} {'is' if len(unguarded) == 1 else 'are'} null: "
                f"the step shows ok on missing data, and {step.spec.probe} does not report "
                "that its data is missing; fail or warn on null, or say why absence is healthy "
                "with absent_ok: <reason>",
            )
        )
    return out


def lint_warnings(doc: MarkedDocument, spec: Runbook, compiled: CompiledRunbook) -> list[Problem]:
    """`null_pass_warnings` of a loaded runbook, located at each step's `expect`."""
    index = {step.id: i for i, step in enumerate(spec.steps)}
    # An alert of the runbook's own name without labels: an expectation that needs more
    # (labels, other steps' facts) errors on these and is not judged here.
    names = {
        "alert": {"name": spec.alert, "state": "firing", "value": None, "labels": {},
                  "annotations": {}},
        "vars": dict(spec.vars),
        "steps": {},
    }  # fmt: skip
    found = null_pass_warnings(((index[s.spec.id], s) for s in compiled.steps), names)
    return [
        doc.at(doc.position(("steps", i, "expect")), f"steps.{i}.expect", f"warning: {text}")
        for i, text in sorted(found)
    ]
