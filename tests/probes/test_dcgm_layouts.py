"""Every dcgm-exporter label layout is read right (`oncall.backends.dcgm`).

The payloads are `fixtures/dcgm/*.prom` (real-shaped exposition text; sources in its README).
Parser level: each is turned into the series Prometheus would store under `honor_labels` true
and false, with prometheus-operator's target labels naming the exporter's own pod. Then the
same files are scraped by a real Prometheus and read through the real query path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from oncall.backends.dcgm import dcgm_query, devices_from_dcgm
from oncall.backends.gpu import GpuDevice
from oncall.model.metrics import Sample
from tests.probes.dcgm_scraped import Scraped, files_scraped

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "dcgm"
#: prometheus-operator's target labels for the Helm chart's exporter pod.
TARGET = {
    "job": "dcgm-exporter",
    "instance": "10.0.3.41:9400",
    "namespace": "gpu-operator",
    "pod": "dcgm-exporter-5q8rt",
    "container": "exporter",
    "service": "dcgm-exporter",
    "endpoint": "metrics",
}
VLLM_GPU_MIB = 75105  # 0.92 x 81079 + 512
FIXTURE_NAMES = (
    "helm-default-4.5.3.prom",
    "main-hostname.prom",
    "virtual-gpus-4.5.3.prom",
    "mig-4.5.3.prom",
)


def stored(name: str, *, honor_labels: bool) -> list[Sample]:
    """The series Prometheus stores from one scrape of the fixture (its `honor_labels` rule:
    false renames a scraped label that clashes with a target label to `exported_<name>`)."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    samples = [Sample({"__name__": "up", **TARGET}, 0.0, 1.0)]
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            scraped = dict(s.labels)
            if honor_labels:
                labels = {**TARGET, **scraped}
            else:
                renamed = {(f"exported_{k}" if k in TARGET else k): v for k, v in scraped.items()}
                labels = {**renamed, **TARGET}
            samples.append(Sample({"__name__": s.name, **labels}, 0.0, s.value))
    return samples


def pods_of(device: GpuDevice) -> list[tuple[str | None, str, float | None]]:
    return [(p.namespace, p.pod, p.memory_used_mib) for p in device.pods]


HONOR = pytest.mark.parametrize("honor_labels", [False, True], ids=["helm-default", "honor"])


@HONOR
@pytest.mark.parametrize("name", ["helm-default-4.5.3.prom", "main-hostname.prom"])
def test_one_pod_per_gpu_both_node_label_spellings(name: str, honor_labels: bool) -> None:
    devices = devices_from_dcgm(stored(name, honor_labels=honor_labels))
    node = "gpu-node-1" if name.startswith("helm") else "gpu-node-2"
    assert [(d.node, d.index) for d in devices] == [(node, i) for i in range(4)]
    # Each allocated GPU to its vLLM pod; the exporter's own pod is never taken for one.
    assert [pods_of(d) for d in devices] == [
        [("ai", "vllm-7c9d5b8f6d-2xk4q", None)],
        [("ai", "vllm-7c9d5b8f6d-8mwzt", None)],
        [],
        [],
    ]
    busy, idle = devices[0], devices[2]
    assert busy.memory_used_mib == VLLM_GPU_MIB
    assert busy.memory_reserved_mib == 480
    assert busy.memory_total_mib == 81559  # used + free + reserved, nvidia-smi's total
    assert busy.memory_used_ratio == pytest.approx(VLLM_GPU_MIB / 81079)
    assert (idle.memory_used_mib, idle.memory_free_mib) == (0, 81079)
    xids = [d.last_xid for d in devices]
    # dcgm-exporter >= 4.0.0: no Xid row before the first Xid, so no last Xid to read.
    assert xids == ([None, None, 79, None] if name.startswith("main") else [None] * 4)


@HONOR
def test_gpu_sharing_device_row_is_the_total_and_pod_rows_the_shares(honor_labels: bool) -> None:
    devices = devices_from_dcgm(stored("virtual-gpus-4.5.3.prom", honor_labels=honor_labels))
    assert [(d.node, d.index) for d in devices] == [("gpu-node-3", 0), ("gpu-node-3", 1)]
    shared, idle = devices
    # The device row, not device + pods (which would be 2x), and FB_FREE once, not per pod.
    assert (shared.memory_used_mib, shared.memory_free_mib) == (73612, 81079 - 73612)
    assert shared.memory_total_mib == 81559
    assert shared.utilization_ratio == pytest.approx(0.63)
    assert pods_of(shared) == [
        ("ai", "vllm-small-6b7f9c-4rj2d", 36806),
        ("ai", "vllm-small-6b7f9c-w8n5x", 36806),
    ]
    assert (pods_of(idle), idle.memory_used_mib, idle.memory_free_mib) == ([], 0, 81079)


@HONOR
def test_mig_instances_are_devices_of_their_own(honor_labels: bool) -> None:
    devices = devices_from_dcgm(stored("mig-4.5.3.prom", honor_labels=honor_labels))
    rows = [(d.index, d.instance_id, d.mig_profile) for d in devices]
    assert rows == [(0, "11", "1g.10gb"), (0, "13", "1g.10gb"), (1, None, None)]
    held, free, whole = devices
    assert held.uuid == free.uuid == "GPU-be839661-c0f5-7452-284b-b875666df60c"  # the parent's
    assert (held.memory_used_mib, held.memory_free_mib) == (9458, 525)
    assert (free.memory_used_mib, free.memory_free_mib) == (14, 9969)
    assert held.memory_used_ratio == pytest.approx(9458 / 9983)
    assert held.utilization_ratio is None  # GPU_UTIL is not reported for MIG instances
    assert pods_of(held) == [("ai", "vllm-tiny-5d8c7b-q2m9z", None)] and pods_of(free) == []
    assert whole.memory_free_mib == 81079 and whole.instance_id is None


def test_without_up_series_any_pod_label_is_the_workload() -> None:
    """Plain Prometheus without target pod labels: `pod` is the exporter's mapping."""
    samples = [s for s in stored("helm-default-4.5.3.prom", honor_labels=True)]
    plain = [
        Sample({k: v for k, v in s.labels.items() if k not in ("namespace", "container")
                or s.labels.get("pod") != TARGET["pod"]}, s.timestamp, s.value)
        for s in samples
        if s.labels["__name__"] != "up"
    ]  # fmt: skip
    devices = devices_from_dcgm(plain)
    assert pods_of(devices[0]) == [("ai", "vllm-7c9d5b8f6d-2xk4q", None)]
    # The exporter's pod label stays on unallocated GPUs: without `up` it cannot be told apart.
    assert pods_of(devices[2])[0][1] == TARGET["pod"]


def test_the_query_reads_both_node_labels_and_the_targets_up() -> None:
    query = dcgm_query("gpu-node-1")
    assert 'Hostname="gpu-node-1"' in query and 'hostname="gpu-node-1"' in query
    assert "up and on (job, instance)" in query


# ------------------------------------------------------------------ through a real Prometheus


def _job(name: str, target: str, path: str, *, honor: bool, suffix: str = "") -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_name": name,
        "honor_labels": honor,
        "metrics_path": path,
        "static_configs": [
            {
                "targets": [target],
                "labels": {k: TARGET[k] for k in ("namespace", "pod", "container")},
            }
        ],
    }
    if suffix:  # the same file again under another setting: keep its GPUs apart by node name
        job["metric_relabel_configs"] = [
            {"source_labels": [label], "regex": "(.+)", "target_label": label,
             "replacement": "${1}" + suffix}
            for label in ("Hostname", "hostname")
        ]  # fmt: skip
    return job


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scraped(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Scraped]:
    def jobs(target: str) -> list[dict[str, Any]]:
        every = [
            _job(f"dcgm-{i}", target, f"/{name}", honor=False)
            for i, name in enumerate(FIXTURE_NAMES)
        ]
        every.append(
            _job("dcgm-honor", target, "/helm-default-4.5.3.prom", honor=True, suffix="-h")
        )
        return every

    files = {name: FIXTURES / name for name in FIXTURE_NAMES}
    directory = tmp_path_factory.mktemp("dcgm-layouts")
    async with files_scraped(directory, files, jobs, what="every fixture scraped") as scraped:
        yield scraped


module_loop = pytest.mark.asyncio(loop_scope="module")


@module_loop
@pytest.mark.parametrize("node", ["gpu-node-1", "gpu-node-1-h", "gpu-node-2"])
async def test_prometheus_helm_default_and_honor_labels_attribute_each_gpu(
    scraped: Scraped, node: str
) -> None:
    devices = await scraped.devices(node)
    assert [d["index"] for d in devices] == [0, 1, 2, 3]
    assert [[p["pod"] for p in d["pods"]] for d in devices] == [
        ["vllm-7c9d5b8f6d-2xk4q"],
        ["vllm-7c9d5b8f6d-8mwzt"],
        [],
        [],
    ]
    assert devices[0]["memory_used_ratio"] == pytest.approx(VLLM_GPU_MIB / 81079)


@module_loop
async def test_prometheus_gpu_sharing_and_mig(scraped: Scraped) -> None:
    shared = await scraped.devices("gpu-node-3")
    assert shared[0]["memory_used_mib"] == 73612
    assert [p["memory_used_mib"] for p in shared[0]["pods"]] == [36806, 36806]
    assert shared[0]["unattributed_mib"] == 0
    mig = await scraped.devices("gpu-node-4")
    assert [(d["index"], d["instance_id"]) for d in mig] == [(0, "11"), (0, "13"), (1, None)]
    assert [[p["pod"] for p in d["pods"]] for d in mig] == [["vllm-tiny-5d8c7b-q2m9z"], [], []]
