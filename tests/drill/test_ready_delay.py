"""`oncall drill up --ready-delay`: how long a started pod takes to become Ready reaches the
cluster process, and the simulator holds a Running pod not Ready for that long."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oncall_drill.cluster.__main__ import parse_args
from oncall_drill.components import DrillError, Ports, cluster_argv
from oncall_drill.kube_sim import KubeSim
from oncall_drill.stack import UpOptions, up
from tests.drill.kube.conftest import NS, start_cluster
from tests.harness.waiting import wait_until


def ports() -> Ports:
    return Ports(**dict.fromkeys(Ports.__dataclass_fields__, 1))


def test_the_delay_reaches_the_cluster_process(tmp_path: Path) -> None:
    argv = cluster_argv(ports(), tmp_path, 2, ready_delay=45)
    assert argv[:3][-1] == "oncall_drill.cluster"
    assert parse_args(argv[3:]).ready_delay == 45
    assert parse_args(cluster_argv(ports(), tmp_path, 2)[3:]).ready_delay is None


@pytest.mark.parametrize("delay", [-1.0, 601.0])
def test_an_out_of_range_delay_is_refused(tmp_path: Path, delay: float) -> None:
    with pytest.raises(DrillError, match=r"--ready-delay must be within \[0, 600\] s"):
        up(UpOptions(directory=tmp_path / "d", ready_delay=delay))


def test_a_started_pod_is_running_but_not_ready_until_the_delay(tmp_path: Path) -> None:
    running = start_cluster(tmp_path, KubeSim(start_delay=0.05, ready_delay=4.0, resync=0.2))
    cluster = next(running)
    try:
        core = cluster.core()

        def running_pods() -> list[Any] | None:
            pods = core.list_namespaced_pod(NS, label_selector="app=vllm").items
            up_now = [p for p in pods if p.status.phase == "Running"]
            return up_now if len(up_now) == 2 else None

        for pod in wait_until(running_pods, within=10, what="2 Running pods"):
            ready = [c for c in pod.status.conditions or [] if c.type == "Ready"]
            assert not ready or ready[0].status == "False"
        assert len(cluster.ready_pods(2)) == 2  # and Ready after the delay
    finally:
        running.close()
