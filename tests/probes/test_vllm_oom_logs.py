"""The LLMOutOfMemory checklist's log readings (`kube.logs` with the runbook's own params)
through oncall's Kubernetes client against the simulator, over recorded vLLM log shapes: a GPU
OOM while serving (exit 0, `Completed`, vllm issue #48966) followed by one `EngineDeadError`
traceback per request in flight, vLLM's start-up memory guard (exit 1, `Error`), and the CUDA
driver's out-of-memory wording."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from oncall.probes import kube_log_facts as facts_of
from oncall.probes.context import ProbeContext
from oncall.probes.kube_logs import PROBES
from oncall.settings.model import KubernetesSettings, Settings
from oncall_drill.kube_sim import KubeSim, SimulatorThread, write_kubeconfig
from tests.drill.kube.conftest import PrintingHook
from tests.harness.waiting import wait_until
from tests.probes.test_kube_causes import checklist

NS = "ai"
ROOT = Path(__file__).resolve().parents[2]
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


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KubeSim, SimulatorThread, Settings, PrintingHook]]:
    hook = PrintingHook(lambda status: b"INFO Application startup complete.\n")
    sim = KubeSim(hook=hook, start_delay=0.02, resync=0.1)
    with SimulatorThread(sim) as server:
        path = write_kubeconfig(tmp_path / "kubeconfig", server.port, sim.users)
        wait_until(
            lambda: len(server.call(lambda: sim.ready_pods(NS))) == 2,
            within=10,
            what="2 ready pods",
        )
        k8s = KubernetesSettings(kubeconfig=path, namespace=NS, timeout=3.0)
        yield sim, server, Settings(kubernetes=k8s), hook


def died_after(
    cluster: tuple[KubeSim, SimulatorThread, Settings, PrintingHook],
    index: int,
    log: bytes,
    reason: str,
    exit_code: int,
) -> str:
    """The index-th pod's container printed `log`, then terminated as `reason`/`exit_code`."""
    sim, server, _, hook = cluster
    pod = sorted(server.call(lambda: sim.ready_pods(NS)), key=lambda p: p["metadata"]["name"])[
        index
    ]
    name = str(pod["metadata"]["name"])
    hook.logs[pod["status"]["containerStatuses"][0]["containerID"]] = log
    server.call(lambda: sim.container_exited(NS, name, "vllm", reason=reason, exit_code=exit_code))
    wait_until(
        lambda: server.call(lambda: len(sim.ready_pods(NS))) == 2, within=10, what="the restart"
    )
    return name


async def read(settings: Settings, pod: str, pattern: str, tail: int = TAIL) -> dict[str, Any]:
    """kube.logs as the runbook's log steps call it (container, tail, skip), with `pattern`."""
    (probe,) = PROBES
    params = probe.params(
        pod=pod, container="vllm", tail_lines=tail, pattern=pattern, skip=VARS["consequence"]
    )
    async with ProbeContext(settings) as ctx:
        facts: dict[str, Any] = await probe.run(ctx, params)
    return facts


async def test_an_oom_while_serving_exits_0_and_is_found_under_64_engine_dead_tracebacks(
    cluster: tuple[KubeSim, SimulatorThread, Settings, PrintingHook],
) -> None:
    name = died_after(cluster, 0, MANY_DEAD, "Completed", 0)
    settings = cluster[2]
    facts = await read(settings, name, VARS["cuda_oom"])
    assert (facts["terminated_reason"], facts["terminated_exit_code"]) == ("Completed", 0)
    assert facts["found"] and not facts["truncated"]
    # Once from the EngineCore's logger, once in the `Process EngineCore:` re-print.
    assert facts["match_count"] == 2
    assert (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB" in (facts["match"])
    )
    assert sum("EngineDeadError" in line for line in facts["lines"]) == 65
    # The last error line is the cause, not the last of the requests' EngineDeadErrors.
    assert "torch.OutOfMemoryError" in facts["last_error_line"]
    guard = await read(settings, name, VARS["startup_guard"])
    assert guard["match"] is None
    both = await read(settings, name, BOTH)
    assert re.search(VARS["cuda_oom"], both["match"])
    assert not re.search(VARS["startup_guard"], both["match"])
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


async def test_the_start_up_memory_guard_is_its_own_verdict(
    cluster: tuple[KubeSim, SimulatorThread, Settings, PrintingHook],
) -> None:
    name = died_after(cluster, 1, GUARD, "Error", 1)
    settings = cluster[2]
    guard = await read(settings, name, VARS["startup_guard"])
    assert (guard["terminated_reason"], guard["terminated_exit_code"]) == ("Error", 1)
    assert guard["match"] is not None
    assert (
        "Free memory on device (61.2/79.19 GiB) on startup is less than desired" in (guard["match"])
    )
    assert (await read(settings, name, VARS["cuda_oom"]))["match"] is None
    both = await read(settings, name, BOTH)
    assert both["match"] == guard["match"]
    assert not re.search(VARS["cuda_oom"], both["match"])


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


#: (pod index, what its first container printed, how it ended, exit code, the failing verdict)
DEATHS = {
    "oom-while-serving": (0, MANY_DEAD, "Completed", 0, "gpu_oom"),
    "start-up-guard": (1, GUARD, "Error", 1, "startup_memory"),
}


@pytest.mark.parametrize("death", sorted(DEATHS))
async def test_the_checklist_run_live_gives_one_verdict(
    cluster: tuple[KubeSim, SimulatorThread, Settings, PrintingHook], death: str
) -> None:
    """LLMOutOfMemory with the real probes: its log steps share one read and each asks which
    signature matched (CEL's RE2 `matches` over the line kube.logs kept)."""
    index, log, reason, code, failing = DEATHS[death]
    name = died_after(cluster, index, log, reason, code)
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
