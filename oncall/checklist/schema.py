"""The JSON Schema of runbook files, generated from the pydantic models and the probe registry.

It is committed as `oncall/checklist/runbook.schema.json` (a test fails when it drifts from the
models: regenerate with `oncall runbook schema > oncall/checklist/runbook.schema.json`), and
every shipped runbook names it on its first line for editors:

    # yaml-language-server: $schema=../oncall/checklist/runbook.schema.json

Beyond the models, each probe's parameters are attached with `if probe == NAME then params:
…` clauses, and each action's parameters likewise, so an editor completes `params` keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from oncall.checklist.runbook import Runbook
from oncall.model.action_params import ACTION_PARAMS
from oncall.probes.registry import all_probes

SCHEMA_PATH = Path(__file__).with_name("runbook.schema.json")
SCHEMA_ID = "https://oncall.invalid/schemas/runbook.schema.json"


#: A duration as the loader reads it (settings/durations.py): "8s", "1m30s", "250ms", "2.5".
DURATION_TEXT = {
    "type": "string",
    "pattern": r"^\s*((\d+(\.\d+)?(ms|s|m|h|d|w|y))+|\d+(\.\d+)?)\s*$",
}
_TEMPLATE = {"type": "string", "pattern": r"\{\{"}


def _templated(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter schema whose values may also be `{{ CEL }}` strings: the loader renders
    them before the parameters are checked, so a constrained string (a pattern, an enum:
    `window: "{{ vars.rate_window }}"`) or a non-string takes a template too."""
    properties = {
        name: prop
        if prop.get("type") == "string" and not ({"pattern", "enum", "format"} & set(prop))
        else {"anyOf": [prop, _TEMPLATE]}
        for name, prop in schema.get("properties", {}).items()
    }
    return {**schema, "properties": properties}


def runbook_schema() -> dict[str, Any]:
    schema = Runbook.model_json_schema()
    defs = schema.setdefault("$defs", {})
    probe_rules = []
    for name, probe in sorted(all_probes().items()):
        params = _templated(probe.params.model_json_schema())
        params.pop("title", None)
        params["description"] = probe.summary
        probe_rules.append(
            {
                "if": {"properties": {"probe": {"const": name}}, "required": ["probe"]},
                "then": {"properties": {"params": params}},
            }
        )
    step = defs["Step"]
    step["properties"]["probe"]["enum"] = sorted(all_probes())
    # `timeout: 8s`: the loader reads duration text (the model's schema says only number).
    step["properties"]["timeout"]["anyOf"].insert(1, DURATION_TEXT)
    step["allOf"] = probe_rules
    action_rules = []
    for action, model in sorted(ACTION_PARAMS.items()):
        params = _templated(model.model_json_schema())
        params.pop("title", None)
        action_rules.append(
            {
                "if": {"properties": {"action": {"const": action}}, "required": ["action"]},
                "then": {"properties": {"params": params}},
            }
        )
    defs["Remediation"]["allOf"] = action_rules
    # A runbook belongs to an alert by name, or to the alerts its `match` matchers select.
    schema["anyOf"] = [
        {"required": ["alert"], "properties": {"alert": {"minLength": 1}}},
        {"required": ["match"], "properties": {"match": {"type": "string", "minLength": 1}}},
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
    }


def schema_text() -> str:
    return json.dumps(runbook_schema(), indent=2, sort_keys=True) + "\n"
