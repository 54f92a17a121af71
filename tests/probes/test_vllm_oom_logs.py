"""The LLMOutOfMemory checklist's log readings (`kube.logs` with the runbook's own params)
through oncall's Kubernetes client against the simulator, over recorded vLLM log shapes: a GPU
OOM while serving (exit 0, `Completed`, vllm issue #48966) followed by one `EngineDeadError`
traceback per request in flight, vLLM's start-up memory guard (exit 1, `Error`), and the CUDA
driver's out-of-memory wording."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from oncall.probes import kube_log_facts as facts_of
from oncall.probes.context import ProbeContext
from oncall.probes.kube_logs import PROBES
from oncall.settings.model import Settings
from tests.probes.kube_cluster import NS, ROOT, Cluster, checklist, died_after

VLLM = ROOT / "fixtures" / "vllm"
MANY_DEAD = (VLLM / "engine_dead_after_oom_64_requests.log").read_bytes()
GUARD = (VLLM / "startup_free_memory_guard.log").read_bytes()
RUNBOOK = yaml.safe_load((ROOT / "runbooks" / "LLMOutOfMemory.yaml").read_text())
VARS: dict[str, str] = RUNBOOK["vars"]
STEPS = {step["id"]: step for step in RUNBOOK["steps"]}
TAIL = int(STEPS["gpu_oom"]["params"]["tail_lines"])
#: The one pattern every log step reads with (one probe call); each step asks which it matched.
BOTH = (
    STEPS["gpu_oom"]["params"]["pattern"]
    .replace("{{ vars.cuda_oom }}", VARS["cuda_oom"])
    .replace("{{ vars.startup_guard }}", VARS["startup_guard"])
)


@dataclass(frozen=True)
class Death:
    """How a pod's container dies in these tests, and what the checklist must say of it."""

    index: int  # which of the two pods (by name)
    log: bytes  # what its first container printed
    reason: str  # how it ended
    exit_code: int
    signature: str  # the runbook var whose pattern finds it
    verdict: str  # the one log step that fails on it


DEATHS = {
    "oom-while-serving": Death(0, MANY_DEAD, "Completed", 0, "cuda_oom", "gpu_oom"),
    "start-up-guard": Death(1, GUARD, "Error", 1, "startup_guard", "startup_memory"),
}


def died_of(cluster: Cluster, death: Death) -> str:
    """The death's pod, once its container died so and was restarted."""
    return died_after(cluster, death.index, death.log, death.reason, death.exit_code)


async def read(settings: Settings, pod: str, pattern: str, tail: int = TAIL) -> dict[str, Any]:
    """kube.logs as the runbook's log steps call it (container, tail, skip), with `pattern`."""
    (probe,) = PROBES
    params = probe.params(
        pod=pod, container="vllm", tail_lines=tail, pattern=pattern, skip=VARS["consequence"]
    )
    async with ProbeContext(settings) as ctx:
        facts: dict[str, Any] = await probe.run(ctx, params)
    return facts


async def found_by_its_own_signature(cluster: Cluster, death: Death) -> dict[str, Any]:
    """The death's log read with its own signature, which finds it (the read names how the
    container ended); the other signature finds nothing, and the one pattern the log steps
    read with (BOTH) keeps the same line."""
    (other,) = {"cuda_oom", "startup_guard"} - {death.signature}
    name = died_of(cluster, death)
    settings = cluster[2]
    facts = await read(settings, name, VARS[death.signature])
    ended = (facts["terminated_reason"], facts["terminated_exit_code"])
    assert ended == (death.reason, death.exit_code)
    assert facts["match"] is not None
    assert (await read(settings, name, VARS[other]))["match"] is None
    both = await read(settings, name, BOTH)
    assert both["match"] == facts["match"]
    assert not re.search(VARS[other], both["match"])
    return facts


async def test_an_oom_while_serving_exits_0_and_is_found_under_64_engine_dead_tracebacks(
    cluster: Cluster,
) -> None:
    facts = await found_by_its_own_signature(cluster, DEATHS["oom-while-serving"])
    assert facts["found"] and not facts["truncated"]
    # Once from the EngineCore's logger, once in the `Process EngineCore:` re-print.
    assert facts["match_count"] == 2
    assert (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB" in (facts["match"])
    )
    assert sum("EngineDeadError" in line for line in facts["lines"]) == 65
    # The last error line is the cause, not the last of the requests' EngineDeadErrors.
    assert "torch.OutOfMemoryError" in facts["last_error_line"]
    # The same death without the re-print (older releases; the re-print can come first): the
    # OOM line is 1,000 lines from the end, past a 200-line tail but inside the runbook's.
    text = MANY_DEAD.decode()
    first_only = text[: text.index("(EngineCore pid=274) Process EngineCore:")]
    lines = facts_of.log_lines(first_only, TAIL)
    cuda_oom, skip = re.compile(VARS["cuda_oom"]), re.compile(VARS["consequence"])
    assert facts_of.last_match(facts_of.log_lines(first_only, 200), cuda_oom) == (None, 0)
    assert facts_of.last_match(lines, cuda_oom)[1] == 1
    last = facts_of.last_error_line(lines, skip)
    assert last is not None
    assert "torch.OutOfMemoryError" in last
    unskipped = facts_of.last_error_line(lines)
    assert unskipped is not None
    assert "EngineDeadError" in unskipped


async def test_the_start_up_memory_guard_is_its_own_verdict(cluster: Cluster) -> None:
    guard = await found_by_its_own_signature(cluster, DEATHS["start-up-guard"])
    assert (
        "Free memory on device (61.2/79.19 GiB) on startup is less than desired" in (guard["match"])
    )


@pytest.mark.parametrize(
    "line",
    [
        "(EngineCore pid=74) ERROR 05-07 00:37:03 [core.py:1136] RuntimeError: CUDA driver "
        "error: out of memory",
        "RuntimeError: CUDA error: out of memory",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        "ERROR [cuda_utils.cc:12] cudaMalloc failed: cudaErrorMemoryAllocation (2)",
    ],
)
def test_cuda_oom_signatures(line: str) -> None:
    assert re.search(VARS["cuda_oom"], line)
    assert not re.search(VARS["startup_guard"], line)


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
        "ValueError: Free memory on device (6.92/8.0 GiB) on startup is less than desired GPU "
        "memory utilization (0.9, 7.2 GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes.",
    ],
)
def test_start_up_guards_are_not_cuda_ooms(line: str) -> None:
    assert re.search(VARS["startup_guard"], line)
    assert not re.search(VARS["cuda_oom"], line)


@pytest.mark.parametrize("death", sorted(DEATHS))
async def test_the_checklist_run_live_gives_one_verdict(cluster: Cluster, death: str) -> None:
    """LLMOutOfMemory with the real probes: its log steps share one read and each asks which
    signature matched (CEL's RE2 `matches` over the line kube.logs kept)."""
    name = died_of(cluster, DEATHS[death])
    failing = DEATHS[death].verdict
    labels = {"namespace": NS, "pod": name, "container": "vllm"}
    steps = await checklist(cluster[2], "LLMOutOfMemory.yaml", labels)
    verdicts = {
        k: steps[k]["status"] for k in ("gpu_oom", "startup_memory", "host_oom", "other_crash")
    }
    assert {k for k, v in verdicts.items() if v == "fail"} == {failing}, verdicts
    assert set(verdicts.values()) == {"ok", "fail"}
    if failing == "gpu_oom":
        assert "GPU out of memory: (EngineCore pid=274)" in steps["gpu_oom"]["summary"]
        assert "torch.OutOfMemoryError: CUDA out of memory" in steps["gpu_oom"]["summary"]
    else:
        assert (
            "lower --gpu-memory-utilization or find the other process on the GPU"
            in (steps["startup_memory"]["summary"])
        )
        assert steps["gpu_oom"]["proposals"] == ()  # --max-num-seqs would not help
