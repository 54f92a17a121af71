"""The drill's Kubernetes simulator as the log and cause tests of the kube probes use it: two
vLLM pods Ready, whose containers print what a test gives them, read through oncall's own
Kubernetes client; a container made to die after printing a recorded log; a runbook run live.

Shared by test_kube_logs.py, test_kube_causes.py and test_vllm_oom_logs.py (the last two
through conftest.py's `cluster`). Not a conftest: an ordinary module, imported by name."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from oncall.model.checklist_events import StepResult
from oncall.service.checklists import load_checked, stream_checklist
from oncall.settings.model import KubernetesSettings, Settings
from oncall_drill.kube_sim import KubeSim, SimulatorThread, write_kubeconfig
from tests.drill.kube.conftest import PrintingHook
from tests.harness.waiting import wait_until

NS = "ai"
ROOT = Path(__file__).resolve().parents[2]
#: What a healthy vLLM container prints: no error line in it.
STARTED = b"INFO Application startup complete.\n"

#: The simulator, the thread serving it, settings that reach it, and the containers' printer.
Cluster = tuple[KubeSim, SimulatorThread, Settings, PrintingHook]


@contextmanager
def printing_cluster(
    tmp_path: Path, output: Callable[[Mapping[str, Any]], bytes] = lambda status: STARTED
) -> Iterator[Cluster]:
    """The default drill cluster, each container instance printing `output(containerStatus)`
    (by default a healthy start), once its 2 vLLM pods are Ready; its settings read namespace
    NS with a 3 s timeout."""
    hook = PrintingHook(output)
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


def died_after(cluster: Cluster, index: int, log: bytes, reason: str, exit_code: int) -> str:
    """The index-th pod's container printed `log`, then terminated as `reason`/`exit_code`;
    its name, once the kubelet has restarted it (both pods Ready again)."""
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


async def checklist(settings: Settings, runbook: str, labels: dict[str, str]) -> dict[str, Any]:
    """The runbook run live (real probes) for an alert with these labels: step id → result."""
    compiled = load_checked(ROOT / "runbooks" / runbook, settings)
    alert = {"name": "test", "state": "firing", "value": 1.0, "labels": labels, "annotations": {}}
    results: dict[str, StepResult] = {}
    async for event in stream_checklist(settings, compiled, alert):
        if isinstance(event, StepResult):
            results[event.id] = event
    return {
        k: {"status": r.status, "summary": r.summary, "proposals": r.proposals}
        for k, r in results.items()
    }
