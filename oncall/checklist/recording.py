"""`oncall check ALERT --record FILE`: a live run's facts written as a runbook test case.

The case holds what the run saw — the alert (state, value, labels, expanded annotations), each
step's probe facts, the steps whose backend did not answer (`unreachable`, with the reason) —
and expects what the run concluded (each step's status, the proposals by id and parameters),
so `oncall runbook test` replays it offline. Authors record fixtures instead of typing them,
then edit the expectations to what the runbook should conclude. An existing test file of the
same runbook gets the case appended; its other cases are kept as they are.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import yaml

from oncall.errors import ConfigError, UsageError
from oncall.model.checklist_events import StepResult, findings_line
from oncall.settings.yaml_marks import load_marked_yaml


def _plain(value: Any) -> Any:
    """JSON-shaped data (times and other values as text), as a test file holds it."""
    return json.loads(json.dumps(value, default=str))


def recorded_case(alert: dict[str, Any], results: list[StepResult], now: float) -> dict[str, Any]:
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    facts = {r.id: _plain(r.facts) for r in results if r.facts is not None}
    unreachable = {
        r.id: r.reason or "no answer" for r in results if r.facts is None and r.status == "unknown"
    }
    case: dict[str, Any] = {
        "name": f"recorded {stamp}: {findings_line(results)}",
        "alert": _plain({k: alert.get(k) for k in ("state", "value", "labels", "annotations")}),
        "facts": facts,
    }
    if unreachable:
        case["unreachable"] = unreachable
    case["expect"] = {
        "steps": {r.id: r.status for r in results},
        "proposals": [
            _plain({"id": p.id, "params": p.params}) for r in results for p in r.proposals
        ],
    }
    return case


def write_record(file: Path, runbook_path: str, case: dict[str, Any]) -> None:
    """Write (or append to) the test file `file` for the runbook at `runbook_path`."""
    runbook = os.path.relpath(Path(runbook_path).resolve(), file.parent.resolve())
    if file.exists() and not file.is_dir():  # a folder: the write below says it cannot
        # Read as `oncall runbook test` reads it (and runbooks are read): bounded in bytes,
        # depth and alias expansion, every problem located; a huge or hostile file is refused.
        doc, problems = load_marked_yaml(file)
        if problems:
            raise ConfigError(problems, what="--record file, not overwritten")
        data = doc.data
        if not isinstance(data.get("tests"), list):
            raise UsageError(f"{file}: not a runbook test file; not overwritten")
        data["tests"].append(case)
    else:
        data = {"runbook": runbook, "tests": [case]}
    file.parent.mkdir(parents=True, exist_ok=True)
    header = "# Runbook test cases; recorded ones by `oncall check --record`.\n"
    file.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True),
                    encoding="utf-8")  # fmt: skip
