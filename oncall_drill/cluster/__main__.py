"""`python -m oncall_drill.cluster`: the drill's Kubernetes cluster as one process.

Serves the Kubernetes API simulator (pods run as vLLM simulator processes), the `vllm`
Service proxy, kube-state-metrics-style series and the node's DCGM exporter, each on its own
loopback port, and keeps a Prometheus file_sd list of the Ready vLLM pods. Runs until
SIGTERM, then stops every pod. (One process for what runs on the cluster's node keeps the
drill's memory down: each Python process costs 30-40 MB.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path

from aiohttp import web

from oncall_drill.cluster.faults import pod_fault_route, scale_route
from oncall_drill.cluster.ksm import metrics_app
from oncall_drill.cluster.pods import VllmPodHook
from oncall_drill.cluster.service import ServiceProxy, file_sd_targets, write_file_sd
from oncall_drill.gpu_sim import fleet as gpu_fleet
from oncall_drill.gpu_sim.layout import Layout
from oncall_drill.gpu_sim.podresources import kube_pod_claims
from oncall_drill.gpu_sim.server import Exporter
from oncall_drill.gpu_sim.server import build_app as gpu_exporter_app
from oncall_drill.kube_sim import KubeSim, default_objects, fleet, serve, write_kubeconfig
from oncall_drill.kube_sim.operator import SimOperator
from oncall_drill.kube_sim.store import seed_names
from oncall_drill.kube_sim.tls import make_certificate, server_context
from oncall_drill.netutil import LOOPBACK
from oncall_drill.simhttp import signalled_stop, simulator_main

NAMESPACE = "ai"
SELECTOR = "app=vllm"
COMPACTION_S = 300.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m oncall_drill.cluster", description=__doc__)
    parser.add_argument("--api-port", type=int, required=True)
    parser.add_argument("--service-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--gpu-port", type=int, required=True, help="DCGM exporter of the node")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument(
        "--api-tls-port", type=int, help="also serve the API with TLS here (for kubectl)"
    )
    parser.add_argument("--file-sd", type=Path, required=True, help="vLLM pod targets file")
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument(
        "--name-seed", type=int, help="generated names from this fixed sequence (--contexts)"
    )
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--kv-capacity-tokens", type=int, default=12_000)
    parser.add_argument("--tokens-per-second", type=float, default=150.0)
    parser.add_argument("--start-delay", type=float, default=0.3)
    parser.add_argument(
        "--ready-delay",
        type=float,
        help="seconds from a container's start to Ready (vLLM: minutes); default: --start-delay",
    )
    parser.add_argument("--dcgm-layout", type=Layout.parse, default=Layout(), help="layout.py")
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="5,000 pods over 50 nodes (400 GPUs) and 20 Deployments (kube_sim/fleet.py)",
    )
    parser.add_argument(
        "--managed",
        action="store_true",
        help="the vllm Deployment owned by a simulated VLLMRuntime operator (kube_sim/operator.py)",
    )
    parser.add_argument(
        "--operator-delay", type=float, default=30.0, help="seconds before the operator reverts"
    )
    return parser.parse_args(argv)


async def _site(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, LOOPBACK, port).start()
    return runner


async def _keep_file_sd(sim: KubeSim, path: Path, stop: asyncio.Event) -> None:
    # The store has no change feed for readiness we can subscribe to cheaply; 4 checks a
    # second is well inside Prometheus' 1 s file_sd refresh.
    while not stop.is_set():
        write_file_sd(path, file_sd_targets(sim, NAMESPACE, SELECTOR))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.25)


def _cluster(args: argparse.Namespace, hook: VllmPodHook) -> KubeSim:
    """The default drill's cluster, or the fleet (whose other pods run no process)."""
    vllm_args = ["--model", "qwen", "--max-num-seqs", str(args.max_num_seqs)]
    if args.fleet:
        hook.only_labels = {"app": "vllm"}
        objects = fleet.base_objects(vllm_args=vllm_args, replicas=args.replicas)
    else:
        objects = default_objects(namespace_name=NAMESPACE, replicas=args.replicas)
        for obj in objects:
            if obj["kind"] == "Deployment":
                obj["spec"]["template"]["spec"]["containers"][0]["args"] = vllm_args
    sim = KubeSim(objects, hook=hook, start_delay=args.start_delay, ready_delay=args.ready_delay)
    if args.fleet:
        fleet.populate(sim.store)
    return sim


def _gpu_app(args: argparse.Namespace, sim: KubeSim) -> web.Application:
    """The node's DCGM exporter; in a fleet, every other node's too (gpu_sim/fleet.py)."""
    # The node's exporter maps each GPU to the pod the kubelet gave it (pods come and go).
    pods = kube_pod_claims(sim, NAMESPACE, SELECTOR, "gpu-node-1")
    gpus = fleet.GPUS_PER_NODE if args.fleet else 4  # the seed's node
    app = gpu_exporter_app(Exporter("gpu-node-1", gpus, pods=pods, layout=args.dcgm_layout))
    if args.fleet:
        others = fleet.node_names()[1:]
        gpu_fleet.mount(app, gpu_fleet.node_exporters(sim, others, gpus, args.dcgm_layout))
    return app


async def _compact(sim: KubeSim, stop: asyncio.Event, every: float = COMPACTION_S) -> None:
    # kube-apiserver's compactor (--etcd-compaction-interval, 5 m): each tick compacts to the
    # revision the previous tick saw, so a continue token lives 5-10 minutes.
    previous = int(sim.store.resource_version)
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
        sim.store.compact(previous)
        previous = int(sim.store.resource_version)


async def amain(args: argparse.Namespace) -> int:
    args.log_dir.mkdir(parents=True, exist_ok=True)
    if args.name_seed is not None:
        seed_names(args.name_seed)
    hook = VllmPodHook(
        log_dir=args.log_dir,
        kv_capacity_tokens=args.kv_capacity_tokens,
        tokens_per_second=args.tokens_per_second,
    )
    sim = _cluster(args, hook)

    def restart_exited(namespace: str, pod: str, code: int) -> None:
        # A process that exits by itself is reason Completed with status 0 (how vLLM ends after
        # an engine death once started, vllm issue #48966), Error with any other status; killed
        # by a signal, the runtime reports 128 + the signal's number, as for any container.
        exit_code = 128 - code if code < 0 else code
        reason = "Completed" if exit_code == 0 else "Error"
        sim.container_exited(namespace, pod, "vllm", reason=reason, exit_code=exit_code)

    hook.on_exit = restart_exited
    write_file_sd(args.file_sd, [])
    tls = None
    certificate = make_certificate(args.kubeconfig.parent / "tls") if args.api_tls_port else None
    if args.api_tls_port and certificate is not None:
        tls = (args.api_tls_port, server_context(*certificate))
    routes = [
        pod_fault_route(sim, NAMESPACE, SELECTOR),
        scale_route(sim, NAMESPACE, "vllm", args.replicas),
    ]
    runners = [await serve(sim, args.api_port, tls=tls, routes=routes)]
    operator = None
    if args.managed:  # after serve: the operator's timers live on this loop
        operator = SimOperator(sim.store, sim.events, NAMESPACE, "vllm", delay=args.operator_delay)
        operator.start()
    runners.append(await _site(ServiceProxy(sim, NAMESPACE, SELECTOR).app(), args.service_port))
    ksm = metrics_app(sim, NAMESPACE, selector=SELECTOR if args.fleet else "", fleet=args.fleet)
    runners.append(await _site(ksm, args.metrics_port))
    runners.append(await _site(_gpu_app(args, sim), args.gpu_port))
    if tls is not None and certificate is not None:  # the app and kubectl use HTTPS
        write_kubeconfig(
            args.kubeconfig, tls[0], sim.users, ca_file=certificate[0], namespace=NAMESPACE
        )
    else:
        write_kubeconfig(args.kubeconfig, args.api_port, sim.users, namespace=NAMESPACE)
    print(f"cluster: api :{args.api_port} service :{args.service_port}", file=sys.stderr)
    stop = signalled_stop()
    keeper = asyncio.create_task(_keep_file_sd(sim, args.file_sd, stop))
    compactor = asyncio.create_task(_compact(sim, stop))
    try:
        await stop.wait()
    finally:
        await keeper
        await compactor
        if operator is not None:
            operator.stop()
        for runner in reversed(runners):
            await runner.cleanup()
        await hook.stop_all()
    return 0


main = simulator_main("cluster", parse_args, amain)


if __name__ == "__main__":
    sys.exit(main())
