"""What a probe is: a named, read-only measurement that turns backend answers into JSON facts.

A probe has a parameters model (pydantic, `extra="forbid"`, so a runbook's typo is a located
lint error), an async `run` that returns a JSON-able dict of facts, and `equivalent`, the
command line an engineer would type to see the same thing (`kubectl get pods -l app=vllm`,
`redis-cli INFO stats`, …), shown next to the evidence. Probes never change anything.

Failures are `BackendError` (the step becomes `unknown` with the reason); a probe must not
catch and hide them. A probe that answered but found no series for a fact says so in its
facts: `absent` maps each fact it could not see to why (`oncall.checklist.absence`); those
facts are listed in `absent_facts`. The step's timeout is applied by the engine, around `run`
as a whole.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from oncall.probes.context import ProbeContext

Facts = dict[str, Any]


class ProbeParams(BaseModel):
    """Base of every probe's parameters: unknown keys are errors. Each model is built when
    first used (`registry.find_probe` builds those a runbook names), not when its module is
    imported: a family's module defines up to 16 of them, a runbook uses a few."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


P = TypeVar("P", bound=ProbeParams)


@dataclass(frozen=True)
class Probe(Generic[P]):
    """One probe. `backend` names what it talks to ("redis", "kubernetes", "gpu", …)."""

    name: str
    backend: str
    summary: str
    params: type[P]
    run: Callable[[ProbeContext, P], Awaitable[Facts]]
    equivalent: Callable[[ProbeContext, P], str]
    #: Default step timeout in seconds when a runbook step does not set one.
    timeout: float = 5.0
    #: Facts this probe lists in `facts.absent` (with the reason) when it found no series for
    #: them: a null it does not list there is a value the series did not give.
    absent_facts: frozenset[str] = frozenset()
