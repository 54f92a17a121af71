"""A simulated operator that owns the drill's vLLM Deployment (`oncall drill up --managed`).

It behaves as vLLM production-stack's `VLLMRuntime` controller does
(`operator/internal/controller/vllmruntime_controller.go`): the Deployment carries a controller
`ownerReference` to the `VLLMRuntime` (`production-stack.vllm.ai/v1alpha1`), the controller
`Owns()` Deployments, so every change to one wakes it, and when the Deployment differs from what
it builds from the custom resource's spec (`deploymentNeedsUpdate`) it writes its own spec back
(`r.Update(ctx, newDep)`). A direct patch of `--max-num-seqs` is thus reverted; the lasting
change is `spec.model.maxNumSeqs` in the `VLLMRuntime`.

What is simplified: the custom resource lives in the operator's memory (the simulator serves no
CRDs; nothing in oncall reads it), only the containers' args are compared, and the revert waits
`delay` seconds (a real controller answers within a second or two; the drill makes the delay
visible, and scales it like every other drill time). The revert is a write like any client's:
a new generation, a rollout by the Deployment controller, and an Event on the Deployment.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from oncall_drill.kube_sim.events import EventRecorder
from oncall_drill.kube_sim.resources import DEPLOYMENTS, ResourceType
from oncall_drill.kube_sim.store import Obj, Store

log = logging.getLogger(__name__)

API_VERSION = "production-stack.vllm.ai/v1alpha1"
KIND = "VLLMRuntime"
COMPONENT = "vllmruntime-controller"
DEFAULT_DELAY_S = 30.0


class SimOperator:
    """Owns `namespace/name` (a Deployment already in `store`) as a VLLMRuntime of that name."""

    def __init__(
        self,
        store: Store,
        events: EventRecorder,
        namespace: str,
        name: str,
        *,
        delay: float = DEFAULT_DELAY_S,
    ) -> None:
        self.store, self.events = store, events
        self.namespace, self.name, self.delay = namespace, name, delay
        self.reverts = 0
        self._pending: asyncio.TimerHandle | None = None
        dep = store.get(DEPLOYMENTS, namespace, name)
        if dep is None:
            raise ValueError(f"no Deployment {namespace}/{name} for the operator to own")
        # The custom resource: its spec is what the Deployment's containers are built from.
        self.runtime: Obj = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "uid": f"vllmruntime-{name}"},
            "spec": {"containers": self._containers(dep)},
        }
        self._adopt(dep)

    @staticmethod
    def _containers(dep: Obj) -> list[dict[str, Any]]:
        containers = dep["spec"]["template"]["spec"].get("containers") or []
        return [{"name": c.get("name"), "args": list(c.get("args") or [])} for c in containers]

    def _adopt(self, dep: Obj) -> None:
        """`ctrl.SetControllerReference`: the Deployment's controller is the VLLMRuntime."""
        new = copy.deepcopy(dep)
        meta = self.runtime["metadata"]
        new["metadata"]["ownerReferences"] = [
            {"apiVersion": API_VERSION, "kind": KIND, "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
        ]  # fmt: skip
        self.store.replace(DEPLOYMENTS, new)

    def start(self) -> None:
        """Watch the owned Deployment (call on the simulator's event loop)."""
        self.store.add_listener(self._on_change)

    def stop(self) -> None:
        self.store.remove_listener(self._on_change)
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def drifted(self, dep: Obj) -> bool:
        """`deploymentNeedsUpdate`: the containers' args are not what the spec builds."""
        wanted: list[dict[str, Any]] = self.runtime["spec"]["containers"]
        return self._containers(dep) != wanted

    def _on_change(self, event: str, rt: ResourceType, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if rt is not DEPLOYMENTS or event == "DELETED" or self._pending is not None:
            return
        if (meta.get("namespace"), meta.get("name")) != (self.namespace, self.name):
            return
        if self.drifted(obj):
            self._pending = asyncio.get_running_loop().call_later(self.delay, self._reconcile)

    def _reconcile(self) -> None:
        self._pending = None
        dep = self.store.get(DEPLOYMENTS, self.namespace, self.name)
        if dep is None or not self.drifted(dep):
            return
        new = copy.deepcopy(dep)
        wanted = {c["name"]: c["args"] for c in self.runtime["spec"]["containers"]}
        for container in new["spec"]["template"]["spec"].get("containers") or []:
            if container.get("name") in wanted:
                container["args"] = list(wanted[container["name"]])
        # An update of the spec: a new generation, as the apiserver gives any client's.
        new["metadata"]["generation"] = int(new["metadata"].get("generation", 1)) + 1
        stored = self.store.replace(DEPLOYMENTS, new)
        self.reverts += 1
        self.events.record(
            stored, "Updated", f"Updated Deployment {self.name} from {KIND} {self.name}",
            component=COMPONENT,
        )  # fmt: skip
        log.info("operator reverted %s/%s", self.namespace, self.name)
