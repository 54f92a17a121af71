"""One simulated cluster: the store, the controllers, the users, and the scenario API.

`KubeSim` is what the HTTP server serves and what the drill orchestration drives. Its methods run on
the event loop that serves the simulator (use `SimulatorThread.call` from another thread).
"""

from __future__ import annotations

from collections.abc import Iterable

from oncall_drill.kube_sim import faults, podstatus
from oncall_drill.kube_sim.controller import Controller
from oncall_drill.kube_sim.events import EventRecorder
from oncall_drill.kube_sim.kubelet import Kubelet
from oncall_drill.kube_sim.podhook import PodHook
from oncall_drill.kube_sim.rbac import Users
from oncall_drill.kube_sim.resources import BY_KIND, DEPLOYMENTS, PODS
from oncall_drill.kube_sim.seed import default_objects
from oncall_drill.kube_sim.selectors import labels_match, parse_label_selector
from oncall_drill.kube_sim.store import Obj, Store


class KubeSim:
    """A simulated Kubernetes cluster."""

    def __init__(
        self,
        objects: Iterable[Obj] | None = None,
        *,
        hook: PodHook | None = None,
        users: Users | None = None,
        start_delay: float = 0.5,
        ready_delay: float | None = None,
        resync: float = 1.0,
    ) -> None:
        """objects: the seed (default: `seed.default_objects()`); delays are in seconds."""
        self.store = Store()
        self.events = EventRecorder(self.store)
        self.users = users or Users()
        self.controller = Controller(
            self.store,
            self.events,
            hook=hook,
            start_delay=start_delay,
            ready_delay=start_delay if ready_delay is None else ready_delay,
            resync=resync,
        )
        self.load(default_objects() if objects is None else objects)

    def load(self, objects: Iterable[Obj]) -> None:
        """Add objects (namespaces first, so that namespaced objects find theirs)."""
        ordered = sorted(objects, key=lambda o: 0 if o.get("kind") == "Namespace" else 1)
        for obj in ordered:
            rt = BY_KIND.get(str(obj.get("kind")))
            if rt is None or obj.get("apiVersion", rt.api_version) != rt.api_version:
                raise ValueError(
                    f"the simulator does not serve {obj.get('apiVersion')}/{obj.get('kind')}"
                )
            ns = (obj.get("metadata") or {}).get("namespace") or (
                "default" if rt.namespaced else None
            )
            self.store.create(rt, obj, ns)

    @property
    def kubelet(self) -> Kubelet:
        """The node agent: it runs the pods' containers (through the pod hook)."""
        return self.controller.kubelet

    async def start(self) -> None:
        """Start the controllers (the HTTP app does this on startup)."""
        self.controller.start()

    async def stop(self) -> None:
        """Stop the controllers and every process the pod hook started."""
        await self.controller.stop()

    # -- scenario API ---------------------------------------------------------------------

    # The faults themselves are in faults.py, each a function of the cluster: as methods here,
    # `sim.oom_kill(namespace, pod)` is `faults.oom_kill(sim, namespace, pod)`.
    #: OOM-kill a container: lastState OOMKilled/137, restartCount + 1, events, restart.
    oom_kill = faults.oom_kill
    #: A container's process died (e.g. the spawned simulator crashed); it is restarted.
    container_exited = faults.container_exited
    #: Set a node condition such as MemoryPressure (with the kubelet's reason and taint).
    set_node_condition = faults.set_node_condition

    # -- queries for orchestration and tests -------------------------------------------------

    def pods(self, namespace: str, label_selector: str = "") -> list[Obj]:
        wanted = parse_label_selector(label_selector)
        return self.store.list(
            PODS, namespace, keep=lambda p: labels_match(wanted, p["metadata"].get("labels"))
        )

    def ready_pods(self, namespace: str, label_selector: str = "") -> list[Obj]:
        return [
            p
            for p in self.pods(namespace, label_selector)
            if podstatus.is_ready(p) and not podstatus.is_terminating(p)
        ]

    def rollout_complete(self, namespace: str, name: str) -> bool:
        """`kubectl rollout status` says "successfully rolled out" and no pod is terminating."""
        dep = self.store.get(DEPLOYMENTS, namespace, name)
        if dep is None:
            return False
        status = dep.get("status") or {}
        want = int(dep["spec"].get("replicas", 1))
        selector = ",".join(
            f"{k}={v}" for k, v in dep["spec"]["selector"].get("matchLabels", {}).items()
        )
        return (
            dep["metadata"].get("generation", 1) <= status.get("observedGeneration", 0)
            and status.get("updatedReplicas", 0) == want
            and status.get("replicas", 0) == want
            and status.get("availableReplicas", 0) == want
            and len(self.pods(namespace, selector)) == want
        )
