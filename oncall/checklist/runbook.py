"""The runbook file format (docs/authoring.md): one YAML checklist per alert, validated by pydantic.

    # yaml-language-server: $schema=../oncall/checklist/runbook.schema.json
    alert: LLMHighP99Latency
    title: P99 end-to-end latency above 1.2 s
    vars: {deployment: vllm, gpu_memory_high: 0.95}
    steps:
      - id: gpu_memory
        title: GPU memory below 95%
        probe: gpu.devices
        expect: facts.max_memory_used_ratio < vars.gpu_memory_high
        summary: "busiest GPU at {{ facts.max_memory_used_ratio | .0% }}"
        evidence:
          - {label: GPU memory used, value: facts.max_memory_used_ratio,
             threshold: vars.gpu_memory_high, unit: ratio}
        propose: [lower-max-num-seqs]
    remediations:
      lower-max-num-seqs:
        action: set-max-num-seqs
        title: Lower --max-num-seqs to fit free GPU memory
        params: {deployment: "{{ vars.deployment }}", value: 64}

Names an expression may use: `alert` (name, state, value, labels, annotations), `vars` (the
runbook's constants), `facts` (this step's probe output; not in `when` or probe `params`) and
`steps` (`steps.ID.status` and `steps.ID.facts` of the steps listed in `needs`).

Every model forbids unknown keys; `loader.py` turns pydantic's errors into FILE:LINE:COL
problems and compiles the expressions; `schema.py` generates the committed JSON Schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from oncall.settings.durations import Duration
from oncall.settings.model import empty_list

STEP_ID = r"^[a-z][a-z0-9_]*$"
REMEDIATION_ID = r"^[a-z][a-z0-9-]*$"
MAX_STEPS = 64
MAX_TIMEOUT_S = 120.0


ProposeOn = Literal["fail", "warn"]


def _action_names() -> tuple[str, ...]:
    # The actions' parameters models (≈ 11 ms of a fresh check's imports) are loaded only
    # when a runbook names an action: half the shipped runbooks propose nothing.
    from oncall.model.action_params import ACTION_PARAMS

    return tuple(ACTION_PARAMS)


def _known_action(value: object) -> object:
    """What `Literal[ACTION_PARAMS names]` checks, with its very error (type, message,
    context), made when a runbook has a remediation: the names are read at that moment, so
    an action registered before (`oncall.remediation.registry.register`) is known."""
    names = _action_names()
    if isinstance(value, str) and value in names:
        return value
    quoted = [repr(name) for name in names]
    expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


class _ActionEnum:
    """The schema of an action name, as pydantic writes a Literal's: the names as `enum`."""

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "enum": list(_action_names())}


#: A remediation's `action`: one of `oncall.model.action_params.ACTION_PARAMS`.
ActionName = Annotated[str, BeforeValidator(_known_action), _ActionEnum()]


def _fail_only() -> list[ProposeOn]:
    return ["fail"]


class RunbookModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Evidence(RunbookModel):
    """One number shown with the step's result, with the threshold it is judged against."""

    label: str = Field(description="What the number is, for people.")
    value: str | float = Field(description="CEL expression (or a number) giving the value.")
    threshold: str | float | None = Field(
        None, description="CEL expression (or a number) giving the threshold."
    )
    unit: str | None = Field(
        None, description="ratio, percent, s, ms, MiB, bytes, tokens/s, count, … (display only)."
    )
    bad: Literal["above", "below"] = Field(
        "above",
        description="Which side of the threshold is unhealthy: above (a usage, a latency) or "
        "below (a hit rate, a throughput floor). A chart draws each point's worst: the peak "
        "for above, the dip for below.",
    )


class Step(RunbookModel):
    """One check: run a probe, judge its facts, propose remediations when it fails."""

    id: str = Field(pattern=STEP_ID, description="Unique id; other steps refer to it in needs.")
    title: str = Field(description="What is checked, phrased as the healthy state.")
    probe: str = Field(description="Probe name, e.g. kube.pods, redis.stats, vllm.metrics.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Probe parameters; strings may hold {{ CEL }}."
    )
    needs: list[str] = Field(
        default_factory=empty_list,
        description="Steps that must finish first; their facts are usable.",
    )
    when: str | None = Field(None, description="CEL: run only when true, else skipped.")
    expect: str | None = Field(
        None,
        description="CEL over facts: true when healthy, false means fail. Without it the step "
        "only gathers facts (ok whenever the probe answers).",
    )
    warn: str | None = Field(None, description="CEL: when expect holds but this is true: warn.")
    absent_ok: str | None = Field(
        None,
        min_length=1,
        description="Why missing data is healthy here (e.g. 'an idle server has no P99'). "
        "Without it, a step whose expect/warn reads a fact its probe found no series for is "
        "unknown, with the probe's reason; with it, the step is judged on the null facts and "
        "this reason is shown.",
    )
    timeout: Duration | None = Field(
        None, description="Bound on the probe, e.g. 3s; default: the probe's own."
    )
    summary: str | None = Field(None, description="One line for people; {{ CEL }} allowed.")
    evidence: list[Evidence] = Field(default_factory=empty_list, description="Numbers to show.")
    propose: list[str] = Field(
        default_factory=empty_list, description="Remediation ids proposed when the step fails."
    )
    propose_on: list[ProposeOn] = Field(
        default_factory=_fail_only, description="Statuses that make the proposals."
    )


class Remediation(RunbookModel):
    """A proposal: an action with parameters, confirmed by a person before anything runs."""

    action: ActionName = Field(description="What to do.")
    title: str = Field(description="The proposal as shown, e.g. 'Rebuild the OOM-killed pod'.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Action parameters; strings may hold {{ CEL }}."
    )
    dangerous: bool = Field(False, description="Ask for the target's name to be typed.")


class Runbook(RunbookModel):
    """The checklist of one alert."""

    alert: str = Field(
        "",
        description="Name of the alerting rule this runbook belongs to; or give `match`.",
    )
    match: str | None = Field(
        None,
        description="Prometheus label matchers on the alert's labels, alertname included, e.g. "
        '{alertname="KubePodCrashLooping", namespace=~"ai|inference"}: the runbook of every '
        "alert they match; the most specific matching runbook wins (the most matchers, "
        "equalities before regexes). A runbook named by `alert` or file name comes first.",
    )
    title: str = Field(description="One line: what the alert means.")
    description: str | None = Field(None, description="Background for the on-call engineer.")
    vars: dict[str, Any] = Field(
        default_factory=dict, description="Constants for expressions (thresholds, names)."
    )
    concurrency: int = Field(8, ge=1, le=32, description="Steps running at once, at most.")
    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS)
    remediations: dict[str, Remediation] = Field(
        default_factory=dict, description="Remediations by id (lowercase, dashes)."
    )
