"""What a loaded runbook is made of: its steps, evidence and remediations with every CEL
expression and template compiled (`oncall.checklist.loader` makes them, the engine runs them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oncall.checklist.expressions import CompiledExpression
from oncall.checklist.runbook import Remediation, Runbook, Step
from oncall.checklist.templates import Template
from oncall.probes.base import Probe


@dataclass(frozen=True)
class CompiledEvidence:
    label: str
    value: CompiledExpression
    threshold: CompiledExpression | None
    unit: str | None
    bad: str = "above"


@dataclass(frozen=True)
class CompiledStep:
    spec: Step
    probe: Probe[Any]
    timeout_s: float
    params: dict[str, Template | object]
    when: CompiledExpression | None
    expect: CompiledExpression | None
    warn: CompiledExpression | None
    summary: Template | None
    evidence: tuple[CompiledEvidence, ...]


@dataclass(frozen=True)
class CompiledRemediation:
    id: str
    spec: Remediation
    params: dict[str, Template | object]


@dataclass(frozen=True)
class CompiledRunbook:
    """A runbook ready to run: expressions compiled, steps in dependency order."""

    path: str
    spec: Runbook
    steps: tuple[CompiledStep, ...]
    remediations: dict[str, CompiledRemediation]
