"""A backend that accepts connections and never answers costs its own steps, nothing more.

`oncall check AIServiceUnavailable` against the drill, with one backend replaced by a silent
listener (`--set`, client timeout 3 s): that backend's steps are `unknown` with a timeout
reason, each within its step timeout + 0.5 s, the checklist ends within that timeout + 0.5 s,
and every other step is judged normally.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.harness.faults import silent_listener

ALERT = "AIServiceUnavailable"
HUNG_TIMEOUT_S = 3.0
#: Redis steps that run only when the service is failing (`when`): unknown if they ran.
GATED = {"redis": {"still_undegraded"}, "vllm": set(), "kubernetes": set()}
STEPS_OF = {
    "redis": {"redis", "degradation_level"},
    "vllm": {"vllm_health"},
    "kubernetes": {"pods_ready"},
}


def check(drill: Drill, *overrides: str) -> dict[str, Any]:
    sets = [arg for item in overrides for arg in ("--set", item)]
    result = run_oncall(
        "--config", str(drill.directory / "oncall.yaml"), *sets, "check", ALERT, "-o", "json",
        timeout=60,
    )  # fmt: skip
    assert result.code in (0, 1, 3), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def hung_kubeconfig(drill: Drill, port: int, tmp_path: Path) -> Path:
    config = yaml.safe_load((drill.directory / "kubeconfig").read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"http://127.0.0.1:{port}"
    path = tmp_path / "hung-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("backend", sorted(STEPS_OF))
def test_a_hung_backend_makes_only_its_steps_unknown_within_its_timeout(
    drill: Drill, backend: str, tmp_path: Path
) -> None:
    with silent_listener() as port:
        overrides = {
            "redis": [f"redis.url=redis://127.0.0.1:{port}/0", f"redis.timeout={HUNG_TIMEOUT_S}"],
            "vllm": [f'vllm.urls=["http://127.0.0.1:{port}"]', f"vllm.timeout={HUNG_TIMEOUT_S}"],
            "kubernetes": [
                f"kubernetes.kubeconfig={hung_kubeconfig(drill, port, tmp_path)}",
                f"kubernetes.timeout={HUNG_TIMEOUT_S}",
            ],
        }[backend]
        report = check(drill, *overrides)
    steps = {s["id"]: s for s in report["steps"]}
    hung = [steps[step_id] for step_id in STEPS_OF[backend]]
    for step in hung:
        assert step["status"] == "unknown", step
        # The client's timeout ("timeout") or, when the first import ate into it, the step's.
        assert "timeout" in step["reason"] or step["reason"].startswith("no answer"), step
        assert HUNG_TIMEOUT_S - 0.05 <= step["duration_s"] <= step["timeout_s"] + 0.5, step
    for step_id in GATED[backend]:  # an earlier test may leave the service failing a while
        assert steps[step_id]["status"] in ("unknown", "skipped"), steps[step_id]
    others = {k: v for k, v in steps.items() if k not in STEPS_OF[backend] | GATED[backend]}
    for step_id, step in others.items():
        assert step["status"] != "unknown", (step_id, step)
        assert step["status"] != "error", (step_id, step)
    # The hung steps bound the whole checklist: it ends within their timeout + 0.5 s. (For
    # Kubernetes the step's time also holds the client's first import, about 1.5 s here.)
    assert report["checklist_s"] <= max(s["timeout_s"] for s in hung) + 0.5, report["checklist_s"]
