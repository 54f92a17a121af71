"""`GET .../pods/NAME/log` through the real kubernetes client: current and previous instance,
tailLines, limitBytes, and the apiserver's errors with its messages."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from oncall_drill.kube_sim import KubeSim
from tests.drill.kube.conftest import (
    DELAY_S,
    NS,
    Cluster,
    PrintingHook,
    StrictCheck,
    start_cluster,
    status_of,
)
from tests.harness.waiting import wait_until


def _three_lines(status: Mapping[str, Any]) -> bytes:
    """Each instance 'prints' three lines naming its containerID."""
    cid = status["containerID"]
    return f"INFO start {cid}\nINFO serving\nERROR last words of {cid}\n".encode()


@pytest.fixture
def logged(tmp_path: Path, strict: StrictCheck) -> Iterator[tuple[Cluster, PrintingHook]]:
    hook = PrintingHook(_three_lines)
    for cluster in start_cluster(tmp_path, KubeSim(hook=hook, start_delay=DELAY_S, resync=0.2)):
        yield cluster, hook


def _error(call: Any) -> tuple[int, str, str]:
    with pytest.raises(ApiException) as info:
        call()
    status = status_of(info.value)
    return info.value.status, status["reason"], status["message"]


def test_current_and_previous_instance_logs(logged: tuple[Cluster, PrintingHook]) -> None:
    cluster, _ = logged
    core = cluster.core(read_only=True)  # reading logs is a `get` the read-only user may do
    name = cluster.ready_pods(2)[0].metadata.name
    pod = core.read_namespaced_pod(name, NS)
    first_id = pod.status.container_statuses[0].container_id
    log = core.read_namespaced_pod_log(name, NS, container="vllm")
    assert log == f"INFO start {first_id}\nINFO serving\nERROR last words of {first_id}\n"
    code, reason, message = _error(
        lambda: core.read_namespaced_pod_log(name, NS, container="vllm", previous=True)
    )
    assert (code, reason) == (400, "BadRequest")
    assert message == f'previous terminated container "vllm" in pod "{name}" not found'

    cluster.call(lambda: cluster.sim.container_exited(NS, name, "vllm", exit_code=1))

    def restarted() -> Any:
        now = core.read_namespaced_pod(name, NS).status.container_statuses[0]
        return now if now.ready and now.container_id != first_id else None

    second_id = wait_until(restarted, within=10, what="the restarted instance ready").container_id
    previous = core.read_namespaced_pod_log(name, NS, previous=True, tail_lines=1)
    assert previous == f"ERROR last words of {first_id}\n"
    assert core.read_namespaced_pod_log(name, NS, tail_lines=2).startswith("INFO serving\n")
    assert second_id in core.read_namespaced_pod_log(name, NS)
    assert core.read_namespaced_pod_log(name, NS, previous=True, limit_bytes=4) == "INFO"
    assert core.read_namespaced_pod_log(name, NS, tail_lines=0) == ""


def test_log_errors_are_the_apiservers(logged: tuple[Cluster, PrintingHook]) -> None:
    cluster, _ = logged
    core = cluster.core()
    name = cluster.ready_pods(2)[0].metadata.name
    assert _error(lambda: core.read_namespaced_pod_log("vllm-nope", NS)) == (
        404,
        "NotFound",
        'pods "vllm-nope" not found',
    )
    assert _error(lambda: core.read_namespaced_pod_log(name, NS, container="sidecar")) == (
        400,
        "BadRequest",
        f"container sidecar is not valid for pod {name}",
    )
    assert _error(lambda: core.read_namespaced_pod_log(name, NS, tail_lines=-1)) == (
        422,
        "Invalid",
        f'PodLogOptions "{name}" is invalid: tailLines: Invalid value: -1: '
        "must be greater than or equal to 0",
    )


def test_a_hook_without_logs_serves_empty_logs(tmp_path: Path, strict: StrictCheck) -> None:
    for cluster in start_cluster(tmp_path, KubeSim(start_delay=DELAY_S, resync=0.2)):
        name = cluster.ready_pods(2)[0].metadata.name
        assert cluster.core().read_namespaced_pod_log(name, NS) == ""
