"""A Kubernetes API server simulator for drills: the subset oncall uses, with the real semantics.

The official kubernetes client works against it unchanged through a generated kubeconfig.

    sim = KubeSim(hook=my_pod_hook, start_delay=0.5)       # seed: seed.default_objects()
    with SimulatorThread(sim) as server:                   # or: runner = await serve(sim, port)
        write_kubeconfig(path, server.port, sim.users)
        server.call(lambda: sim.oom_kill("ai", pod_name))

Run standalone with `python -m oncall_drill.kube_sim --port N --kubeconfig FILE`.
"""

from oncall_drill.kube_sim.kubeconfig import (
    OPERATOR_CONTEXT,
    READ_ONLY_CONTEXT,
    kubeconfig,
    write_kubeconfig,
)
from oncall_drill.kube_sim.podhook import NoopPodHook, PodHook, container_args
from oncall_drill.kube_sim.rbac import User, Users
from oncall_drill.kube_sim.runner import SimulatorThread, serve
from oncall_drill.kube_sim.seed import default_objects, load_objects
from oncall_drill.kube_sim.server import create_app
from oncall_drill.kube_sim.sim import KubeSim

__all__ = [
    "OPERATOR_CONTEXT",
    "READ_ONLY_CONTEXT",
    "KubeSim",
    "NoopPodHook",
    "PodHook",
    "SimulatorThread",
    "User",
    "Users",
    "container_args",
    "create_app",
    "default_objects",
    "kubeconfig",
    "load_objects",
    "serve",
    "write_kubeconfig",
]
