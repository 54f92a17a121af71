"""`--gpu-memory-utilization` read as vLLM reads it, and the `gpu.vllm_memory` probe against the
drill's Kubernetes API simulator (oncall's Kubernetes client, over HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncall.errors import BackendError
from oncall.probes.context import ProbeContext
from oncall.probes.gpu import VllmMemoryParams, run_vllm_memory, vllm_memory_equivalent
from oncall.probes.gpu_args import parse_gpu_memory_utilization
from oncall.settings.model import KubernetesSettings, Settings
from oncall_drill.kube_sim import KubeSim, SimulatorThread, write_kubeconfig
from oncall_drill.kube_sim.seed import vllm_deployment
from tests.harness.waiting import wait_until

NS = "ai"


@pytest.mark.parametrize(
    ("command", "args", "env", "expected"),
    [
        ([], ["--model", "m"], [], (None, "default", 0.92)),
        ([], ["--model", "m", "--gpu-memory-utilization", "0.97"], [], (0.97, "flag", 0.97)),
        ([], ["--gpu-memory-utilization=0.95"], [], (0.95, "flag", 0.95)),
        ([], ["--gpu_memory_utilization", "0.9"], [], (0.9, "flag", 0.9)),
        ([], ["--gpu-memory-util", "0.8"], [], (0.8, "flag", 0.8)),  # argparse abbreviation
        ([], ["--gpu-memory-utilization", "0.5", "--gpu-memory-utilization", "0.96"], [],
         (0.96, "flag", 0.96)),  # the last one wins
        (["/bin/sh", "-c"], ["exec vllm serve m --gpu-memory-utilization 0.98"], [],
         (0.98, "shell", 0.98)),
        ([], ["vllm serve m --gpu-memory-utilization=0.85"], [], (0.85, "flag", 0.85)),
        ([], ["--gpu-memory-utilization", "$(GMU)"], [{"name": "GMU", "value": "0.96"}],
         (0.96, "flag", 0.96)),
    ],
)  # fmt: skip
def test_forms_vllm_accepts(
    command: list[str], args: list[str], env: list[dict[str, str]], expected: tuple[Any, ...]
) -> None:
    parsed = parse_gpu_memory_utilization(command, args, env)
    assert (parsed.value, parsed.form, parsed.effective) == expected
    assert parsed.problem is None


@pytest.mark.parametrize(
    ("args", "kv_bytes"),
    [
        (["--gpu-memory-utilization", "0.97", "--kv-cache-memory-bytes", "8589934592"], 8 * 2**30),
        (["--kv-cache-memory-bytes=8G", "--gpu-memory-utilization=0.97"], 8 * 2**30),
        (["--kv_cache_memory_bytes", "8g"], 8 * 10**9),
        (["--kv-cache-memory", "25.6k"], 25600),  # an abbreviation; decimal k
        (["--kv-cache-memory-bytes", "1K"], 1024),
    ],
)
def test_kv_cache_memory_bytes_overrides_the_fraction(args: list[str], kv_bytes: int) -> None:
    """vllm/config/cache.py: when set it sizes the KV pool, and the fraction decides nothing."""
    parsed = parse_gpu_memory_utilization([], ["--model", "m", *args], [])
    assert (parsed.form, parsed.effective, parsed.kv_cache_memory_bytes) == (
        "kv_cache_memory_bytes", None, kv_bytes
    )  # fmt: skip


def test_a_kv_cache_size_vllm_would_reject_says_why() -> None:
    parsed = parse_gpu_memory_utilization([], ["--kv-cache-memory-bytes", "lots"], [])
    assert (parsed.form, parsed.effective) == ("unresolved", None)
    assert parsed.problem == "--kv-cache-memory-bytes value 'lots' is not a size"
    # `--kv-cache-dtype` shares the prefix: not the size flag.
    dtype = parse_gpu_memory_utilization([], ["--kv-cache-dtype", "fp8"], [])
    assert (dtype.form, dtype.effective) == ("default", 0.92)


def test_unresolvable_values_say_why() -> None:
    secret_env = [{"name": "GMU", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]
    parsed = parse_gpu_memory_utilization([], ["--gpu-memory-utilization", "$(GMU)"], secret_env)
    assert (parsed.value, parsed.form, parsed.effective) == (None, "unresolved", None)
    assert parsed.problem is not None and "$(GMU)" in parsed.problem
    escaped = parse_gpu_memory_utilization([], ["--gpu-memory-utilization", "$$(GMU)"], [])
    assert escaped.form == "unresolved"  # `$$(GMU)` is the literal text `$(GMU)`
    dangling = parse_gpu_memory_utilization([], ["--gpu-memory-utilization"], [])
    assert dangling.problem == "--gpu-memory-utilization has no value"
    assert parse_gpu_memory_utilization([], ["--gpu-memory"], []).form == "default"  # ambiguous


def _deployment(name: str, args: list[str], env: list[dict[str, Any]] | None = None) -> Any:
    dep = vllm_deployment(name=name, replicas=0)
    container = dep["spec"]["template"]["spec"]["containers"][0]
    container["args"] = args
    if env is not None:
        container["env"] = env
    return dep


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    objects = [
        _deployment("vllm", ["--model", "qwen", "--max-num-seqs", "256"]),
        _deployment("vllm-greedy", ["--model", "qwen", "--gpu-memory-utilization=0.97"]),
        _deployment(
            "vllm-env", ["--gpu-memory-utilization", "$(GMU)"], [{"name": "GMU", "value": "0.95"}]
        ),
    ]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    sim = KubeSim([namespace, *objects], start_delay=0.02)
    with SimulatorThread(sim) as server:
        path = write_kubeconfig(tmp_path / "kubeconfig", server.port, sim.users)
        wait_until(lambda: server.call(lambda: True), within=10, what="the API answers")
        yield path


async def _facts(kubeconfig: Path, **params: Any) -> dict[str, Any]:
    settings = Settings(kubernetes=KubernetesSettings(kubeconfig=kubeconfig, namespace=NS))
    async with ProbeContext(settings) as ctx:
        return await run_vllm_memory(ctx, VllmMemoryParams(**params))


async def test_probe_reads_each_deployment(kubeconfig: Path) -> None:
    default = await _facts(kubeconfig, deployment="vllm")
    assert default == {
        "deployment": "vllm",
        "container": "vllm",
        "gpu_memory_utilization": 0.92,
        "configured": None,
        "form": "default",
        "kv_cache_memory_bytes": None,
        "default": 0.92,
        "problem": None,
    }
    greedy = await _facts(kubeconfig, deployment="vllm-greedy")
    assert (greedy["gpu_memory_utilization"], greedy["form"]) == (0.97, "flag")
    from_env = await _facts(kubeconfig, deployment="vllm-env")
    assert (from_env["gpu_memory_utilization"], from_env["configured"]) == (0.95, 0.95)


async def test_probe_errors_name_what_is_missing(kubeconfig: Path) -> None:
    with pytest.raises(BackendError) as caught:
        await _facts(kubeconfig, deployment="vllm", container="sidecar")
    assert (caught.value.reason, caught.value.backend) == ("not found", "kubernetes")
    assert 'no container "sidecar"' in caught.value.detail
    with pytest.raises(BackendError) as missing:
        await _facts(kubeconfig, deployment="nope")
    assert missing.value.reason == "not found"


def test_equivalent_is_kubectl() -> None:
    settings = Settings(kubernetes=KubernetesSettings(namespace=NS))
    text = vllm_memory_equivalent(ProbeContext(settings), VllmMemoryParams(deployment="vllm"))
    assert text == "kubectl get deployment vllm -n ai -o yaml"
