"""The shell script the checklist benches race against does the steps' own commands, whole.

scripts/bench/checklist.py (and cold_check.py) time a bash script of each step's
command-line equivalent: a command that broke in the script would make it fail fast and the
comparison flatter oncall. These build it from hand-made step results, no drill needed.
"""

from __future__ import annotations

import shlex
from typing import Any

from oncall.model.checklist_events import StepResult
from scripts.bench.checklist import commands, logs_commands

KUBECTL = "kubectl --kubeconfig /tmp/kubeconfig"


def _step(probe: str, equivalent: str, params: dict[str, Any], facts: dict[str, Any]) -> StepResult:
    return StepResult(
        id="s", title="s", status="ok", reason=None, summary=None, duration_s=0.0,
        started_at=0.0, probe=probe, params=params, equivalent=equivalent, timeout_s=1.0,
        facts=facts,
    )  # fmt: skip


def test_a_query_written_over_lines_is_one_command() -> None:
    query = "sort(\n  sum by (job) (rate(x[1m]))\n  / 2\n)"
    equivalent = f"curl -s http://p/api/v1/query --data-urlencode {shlex.quote(query)}\ncurl -s b"
    found = commands(equivalent)
    assert found == [equivalent.rsplit("\n", 1)[0], "curl -s b"]
    assert shlex.split(found[0])[-1] == query


def test_logs_without_a_pod_lists_the_pods_and_reads_the_chosen_log() -> None:
    equivalent = f"{KUBECTL} logs POD -n ai -c vllm --previous --tail=200 --limit-bytes=262144"
    params = {"pod": "", "selector": "app=vllm", "container": "vllm", "previous": True}
    listing = f"{KUBECTL} get pods -n ai -l app=vllm"
    found = {"pod": "vllm-0", "found": True}
    assert logs_commands(_step("kube.logs", equivalent, params, found)) == [
        listing,
        equivalent.replace(" POD ", " vllm-0 "),
    ]
    # no container had terminated: the probe read the list and asked for no log
    none = {"pod": None, "found": False}
    assert logs_commands(_step("kube.logs", equivalent, params, none)) == [listing]


def test_logs_of_a_named_pod_is_the_equivalent_itself() -> None:
    equivalent = f"{KUBECTL} logs vllm-1 -n ai --tail=100 --limit-bytes=262144"
    step = _step("kube.logs", equivalent, {"pod": "vllm-1"}, {"pod": "vllm-1", "found": True})
    assert logs_commands(step) == [equivalent]
