"""Drill scenarios: named faults that each trip one golden alert, as YAML files.

A scenario names the alert it should trip, the Prometheus query of the signal behind that
alert with the threshold it crosses, the load it needs, and the fault steps `inject` applies.
`clear` undoes every fault whatever was injected (see `stack.clear`). Files live in
`oncall_drill/fixtures/scenarios/*.yaml`; a team adds its own with `--scenarios DIR`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oncall_drill.components import DrillError

BUILTIN_DIR = Path(__file__).parent / "fixtures" / "scenarios"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Signal(Strict):
    """The metric behind the alert: `query` crosses `threshold` in direction `op`."""

    query: str
    op: Literal[">", "<"]
    threshold: float


class Load(Strict):
    rate: float = Field(gt=0, le=200)
    curve: Literal["constant", "ramp", "spike"] = "constant"


class Step(Strict):
    """One fault step.

    - `http`: POST `json` to `path` of `component` (gateway, gpu-exporter, cluster-api);
    - `vllm_fault`: POST {"fault": fault} to every Ready vLLM pod;
    - `oom_kill`: OOM-kill the container of the pod at `pod_index` (sorted by name);
    - `node_condition`: set `condition` of the GPU node to `status`.
    """

    kind: Literal["http", "vllm_fault", "oom_kill", "node_condition"]
    component: Literal["gateway", "gpu-exporter", "cluster-api"] | None = None
    path: str | None = None
    json_body: dict[str, Any] | None = Field(None, alias="json")
    fault: str | None = None
    pod_index: int = 0
    condition: str | None = None
    status: bool = True


class Scenario(Strict):
    name: str
    description: str
    alert: str | None = Field(description="The golden alert it trips; null for healthy.")
    signal: Signal | None = None
    load: Load = Load(rate=4)
    inject: list[Step] = Field(default_factory=list)


def load_scenario(path: Path) -> Scenario:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        scenario = Scenario.model_validate(raw)
    except yaml.YAMLError as exc:
        raise DrillError(f"{path}: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise DrillError(f"{path}: {problems}") from exc
    if scenario.name != path.stem:
        raise DrillError(f"{path}: name {scenario.name!r} must match the file name")
    return scenario


def all_scenarios(extra_dir: Path | None = None) -> dict[str, Scenario]:
    found: dict[str, Scenario] = {}
    for directory in [BUILTIN_DIR, *([extra_dir] if extra_dir else [])]:
        for path in sorted(directory.glob("*.yaml")):
            scenario = load_scenario(path)
            found[scenario.name] = scenario
    return found


def get_scenario(name: str, extra_dir: Path | None = None) -> Scenario:
    scenarios = all_scenarios(extra_dir)
    if name not in scenarios:
        raise DrillError(f"unknown scenario {name!r}; known: {', '.join(sorted(scenarios))}")
    return scenarios[name]
