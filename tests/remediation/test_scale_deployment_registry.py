"""scale-deployment is one module plus one registry line, and every layer that names actions
follows: the CLI's subcommand and help, the runbook schema's action list, the audit log's
names, `ActionName` and the settings that name actions (the shipped-action counterpart of
tests/remediation/test_adding_an_action.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

import pytest

from oncall.audit.records import check_fields
from oncall.checklist.schema import runbook_schema
from oncall.cli.main import build_parser, main
from oncall.model import action_params
from oncall.remediation import registry
from oncall.remediation.actions import scale_deployment
from oncall.settings.model import GuardsSettings

ROOT = Path(__file__).resolve().parents[2]
NAME = "scale-deployment"


def test_the_module_and_its_line_are_the_action() -> None:
    assert registry.module_of(NAME) == "oncall.remediation.actions.scale_deployment"
    assert registry.action_named(NAME) is scale_deployment.ACTION
    assert action_params.ACTION_PARAMS[NAME] is action_params.ScaleDeploymentParams


#: The layers that list, run, audit or show actions: none may name one (they read the registry).
NAMING_LAYERS = ("cli", "audit", "checklist", "service", "tui", "serve", "remediation")


def test_no_layer_that_lists_actions_names_it() -> None:
    """Of the code that lists, runs, audits or shows actions, only the action's own module
    names it; its parameters model and line are in oncall/model/action_params.py. (Its
    policy setting, guards.scale_with_hpa, and the node-fit check it calls are its parts.)"""
    naming = re.compile(r"scale-deployment|ScaleDeployment|scale_deployment")
    found = sorted(
        str(path.relative_to(ROOT))
        for layer in NAMING_LAYERS
        for path in (ROOT / "oncall" / layer).rglob("*.py")
        if naming.search(path.read_text(encoding="utf-8"))
    )
    assert found == ["oncall/remediation/actions/scale_deployment.py"]
    assert naming.search((ROOT / "oncall/model/action_params.py").read_text())


def test_the_audit_log_and_action_name_know_it() -> None:
    assert NAME in get_args(action_params.ActionName)
    check_fields({"action_id": "a1", "transition": "proposed", "action": NAME, "target": {}})
    listing = build_parser().parse_args(["audit", "list", "--action", NAME])
    assert listing.action == NAME


def test_the_cli_has_its_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["remediate", NAME, "vllm", "3", "--namespace", "ai"])
    assert (args.action, args.deployment, args.replicas, args.namespace) == (NAME, "vllm", 3, "ai")
    with pytest.raises(SystemExit):
        main(["remediate", "--help"])
    assert NAME in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["remediate", NAME, "--help"])
    help_text = capsys.readouterr().out
    assert "New replica count: above the current one" in help_text


def test_the_committed_runbook_schema_lists_it() -> None:
    committed = json.loads((ROOT / "oncall/checklist/runbook.schema.json").read_text())
    assert NAME in json.dumps(committed)
    assert committed == runbook_schema()


def test_settings_that_name_actions_take_it() -> None:
    assert GuardsSettings(two_person=[NAME]).two_person == [NAME]
    assert GuardsSettings(scale_with_hpa="raise-min").scale_with_hpa == "raise-min"
    with pytest.raises(ValueError, match="scale_with_hpa"):
        GuardsSettings(scale_with_hpa="fight")
