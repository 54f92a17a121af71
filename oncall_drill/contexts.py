"""`oncall drill up --contexts N`: N independent drill stacks and one settings file naming all.

Each stack is a whole drill (its own Kubernetes API, vLLM pods, Redis, Prometheus, gateway
and load) in `DIR/<name>` (eu, us, ap, …), on ports of its own, with the same pod names in
each: what a team running one service in several regions sees. `DIR/oncall.yaml` has the
shared sections once and, under `contexts:`, each stack's Prometheus, Kubernetes (its own
kubeconfig and context), Redis, vLLM and GPU settings: `oncall --config DIR/oncall.yaml`
shows every context on one board. `DIR/contexts.json` lists the stacks, so that `drill down`
and `drill status` on DIR reach all of them, and `--context NAME` picks one for `inject` and
`clear`. `--scenario` goes to the first context only: a fault in one region.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import yaml

from oncall_drill.components import DrillError
from oncall_drill.stack import UpOptions, down, up
from oncall_drill.supervisor import DrillState

NAMES = ("eu", "us", "ap", "sa", "me", "af")
#: Every stack's cluster names its objects from this one sequence: the same pod names in each.
NAME_SEED = 18
INDEX = "contexts.json"
#: The sections of a stack's oncall.yaml that are its own cluster's (settings' per-context
#: sections; the drill does not import the settings, an import-linter contract).
PER_CONTEXT = ("prometheus", "alertmanager", "kubernetes", "redis", "vllm", "gpu")


def context_names(directory: Path) -> list[str] | None:
    """The stacks of a `--contexts` drill in `directory`; None when it is a single drill."""
    index = directory / INDEX
    if not index.is_file():
        return None
    names: list[str] = json.loads(index.read_text())["contexts"]
    return names


def stack_dir(directory: Path, context: str | None) -> Path:
    """The drill directory a command on `directory` with `--context` means."""
    names = context_names(directory)
    if names is None or context is None:
        return directory
    if context not in names:
        raise DrillError(f"no context {context!r} in {directory}; the contexts: {', '.join(names)}")
    return directory / context


def up_contexts(options: UpOptions, count: int) -> list[tuple[str, DrillState]]:
    """Start `count` stacks, one after the other (two cores: not at once), and write the
    settings naming them; a stack that fails to start stops the ones before it."""
    if not 1 <= count <= len(NAMES):
        raise DrillError(f"--contexts must be within 1..{len(NAMES)}, got {count}")
    directory = options.directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    started: list[tuple[str, DrillState]] = []
    try:
        for index, name in enumerate(NAMES[:count]):
            scenario = options.scenario if index == 0 else None
            stack = dataclasses.replace(
                options, directory=directory / name, scenario=scenario, name_seed=NAME_SEED
            )
            started.append((name, up(stack)))
    except BaseException:
        for _, state in reversed(started):
            down(Path(state.directory))
        raise
    names = [name for name, _ in started]
    (directory / INDEX).write_text(json.dumps({"contexts": names}) + "\n")
    write_contexts_config(directory, names)
    return started


def write_contexts_config(directory: Path, names: list[str]) -> Path:
    """DIR/oncall.yaml: the first stack's shared sections, each stack's own under contexts."""
    own = {name: yaml.safe_load((directory / name / "oncall.yaml").read_text()) for name in names}
    settings: dict[str, Any] = {
        key: value for key, value in own[names[0]].items() if key not in PER_CONTEXT
    }
    settings["context"] = {"name": "drill", "production": False}
    settings["audit"] = {"path": str(directory / "audit.jsonl")}
    contexts: dict[str, Any] = {}
    for name in names:
        entry = {key: own[name][key] for key in PER_CONTEXT if key in own[name]}
        kubeconfig = yaml.safe_load(Path(entry["kubernetes"]["kubeconfig"]).read_text())
        entry["kubernetes"]["context"] = kubeconfig["current-context"]
        contexts[name] = entry
    settings["contexts"] = contexts
    path = directory / "oncall.yaml"
    header = "# Written by `oncall drill up --contexts`: one context per drill stack.\n"
    path.write_text(header + yaml.safe_dump(settings, sort_keys=False))
    return path


def down_contexts(directory: Path, names: list[str]) -> list[dict[str, Any]]:
    """Stop every stack; each row of the report names its context."""
    report: list[dict[str, Any]] = []
    for name in names:
        stack = directory / name
        if DrillState.load(stack.resolve()) is None:
            continue  # stopped already
        report += [{**row, "name": f"{name}/{row['name']}"} for row in down(stack)]
    (directory / INDEX).unlink(missing_ok=True)
    return report
