"""set-max-num-seqs: patch vLLM's `--max-num-seqs` in a Deployment's args; follow the rollout.

Plan: the Deployment, the current value in whatever form its args hold it, and the JSON patch:
`test` ops on the Deployment's generation and on the container's whole `command` and `args`
lists as they were planned, then the `test`/`replace` ops on the exact elements
(oncall/model/patches.py). The `test` ops are the plan's preconditions: the apiserver refuses
the whole patch when any of them moved — another arg appended, a new generation — and the
refusal says what changed.

Command-line equivalents: `kubectl patch deployment NAME --type=json -p OPS --dry-run=server`,
the patch, `kubectl rollout status deployment NAME`, and the new pods' args.
"""

from __future__ import annotations

from typing import Any

from oncall.errors import BackendError
from oncall.model.action_params import SetMaxNumSeqsParams
from oncall.model.kube_expansion import Env
from oncall.model.max_num_seqs_rule import change_both_patch, max_num_seqs_change_problems
from oncall.model.patches import find_container, max_num_seqs_patch, value_at
from oncall.model.vllm_args import parse_max_num_active_seqs, parse_max_num_seqs
from oncall.model.write_path import GuardVerdict, Plan, Precondition, Target
from oncall.remediation.action import Action, PlanError, Say
from oncall.remediation.capacity import PodsTaken
from oncall.remediation.clients import Clients

ROLLOUT_TIMEOUT_S = 180.0


class SetMaxNumSeqs(Action[SetMaxNumSeqsParams]):
    name = "set-max-num-seqs"
    params = SetMaxNumSeqsParams

    def pods_taken(self, plan: Plan) -> PodsTaken:
        """The rollout restarts every pod, one at a time: the busiest one is the worst case."""
        return PodsTaken(busiest=1)

    async def plan(self, params: SetMaxNumSeqsParams, clients: Clients) -> Plan:
        namespace = self.allowed_namespace(params.namespace, clients)
        kube = await clients.kube_writer()
        deployment = await kube.get_deployment(namespace, params.deployment)
        try:
            index, container = find_container(deployment, params.container)
            env = Env.of_container(container)
            command, args = container.get("command") or [], container.get("args") or []
            parsed = parse_max_num_seqs(command, args, env)
            active = parse_max_num_active_seqs(command, args, env)
            # vLLM refuses to start with --max-num-active-seqs above --max-num-seqs: a value
            # below it is refused in the preview (as a check), unless both are to be lowered.
            problems = max_num_seqs_change_problems(
                container, params.value, change_both=bool(params.change_both)
            )
            lowers_active = (
                not problems and active.value is not None and active.value > params.value
            )
            if lowers_active and params.change_both:
                ops = change_both_patch(deployment, params.container, params.value)
            else:
                ops = max_num_seqs_patch(deployment, params.container, params.value)
        except ValueError as exc:
            raise PlanError(f"set-max-num-seqs on {namespace}/{params.deployment}: {exc}") from exc
        checks = tuple(GuardVerdict("max-num-active-seqs", False, p) for p in problems) or (
            GuardVerdict(
                "max-num-active-seqs",
                True,
                f"--max-num-active-seqs {active.value} lowered with it"
                if lowers_active
                else "--max-num-active-seqs unset"
                if active.value is None
                else f"--max-num-active-seqs {active.value} ≤ {params.value}",
            ),
        )
        meta = deployment.get("metadata") or {}
        ops = [*_whole_spec_tests(deployment, index, container), *ops]
        target = Target(
            "Deployment", params.deployment, namespace, meta.get("uid"), meta.get("resourceVersion")
        )
        return Plan(
            action=self.name,
            params=params.model_dump(exclude_none=True),
            target=target,
            before=f"--max-num-seqs {parsed.value} ({parsed.form} form, "
            f"container {container.get('name')})"
            + ("" if active.value is None else f", --max-num-active-seqs {active.value}"),
            after=f"--max-num-seqs {params.value}"
            + (
                f" and --max-num-active-seqs {params.value} (a rollback restores "
                "--max-num-seqs only)"
                if lowers_active
                else ""
            )
            + ", rolled out to every pod",
            request={
                "method": "PATCH",
                "path": f"/apis/apps/v1/namespaces/{namespace}/deployments/{params.deployment}",
                "content_type": "application/json-patch+json",
                "body": ops,
            },
            dangerous=True,
            confirm_word=params.deployment,
            undo=None
            if parsed.value is None
            # The undo restores --max-num-seqs only: a lowered --max-num-active-seqs stays
            # lowered, which keeps vLLM's rule (active ≤ max-num-seqs) whatever the old value.
            else {
                **params.model_dump(exclude_none=True, exclude={"change_both"}),
                "value": parsed.value,
            },
            preconditions=tuple(
                Precondition(op["path"], op["value"]) for op in ops if op["op"] == "test"
            ),
            checks=checks,
        )

    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        kube = await clients.kube_writer()
        result = await kube.patch_deployment_json(
            plan.target.namespace or "", plan.target.name, plan.request["body"], dry_run=True
        )
        return {"server": "patch accepted (dry run)", "generation": _generation(result)}

    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        # The patch's own `test` ops compare the preconditions, on the server, atomically.
        try:
            await self.dry_run(plan, clients)
        except BackendError as exc:
            if exc.reason == "invalid":
                what = await _what_changed(plan, clients)
                return f"the Deployment's args changed since the preview ({what})"
            raise
        return None

    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        kube = await clients.kube_writer()
        result = await kube.patch_deployment_json(
            plan.target.namespace or "", plan.target.name, plan.request["body"], dry_run=False
        )
        return {"patched": plan.target.name, "generation": _generation(result)}

    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        kube = await clients.kube_writer()
        namespace, name = plan.target.namespace or "", plan.target.name

        def progress(status: Any) -> None:
            say(f"rollout: {status.message}")

        status = await kube.wait_rollout(
            namespace, name, timeout=ROLLOUT_TIMEOUT_S, on_progress=progress
        )
        if not status.done:
            return False, f"rollout not complete: {status.message}"
        deployment = await kube.get_deployment(namespace, name)
        labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods = await kube.list_pods(namespace, label_selector=selector)
        wanted = int(plan.params["value"])
        seen: list[int | None] = []
        for pod in pods:
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            for container in (pod.get("spec") or {}).get("containers") or []:
                command = container.get("command") or []
                parsed = parse_max_num_seqs(command, container.get("args") or [])
                if parsed.value is not None or parsed.form != "default":
                    seen.append(parsed.value)
        if seen and all(v == wanted for v in seen):
            return True, f"rollout complete; {len(seen)} pod(s) run --max-num-seqs {wanted}"
        return False, f"rollout complete but pods run --max-num-seqs {seen}, not {wanted}"


def _whole_spec_tests(
    deployment: dict[str, Any], index: int, container: Any
) -> list[dict[str, Any]]:
    """`test` ops on what the element tests alone miss: a new generation (any change to the
    spec), and the container's whole command and args lists (an arg appended or removed)."""
    base = f"/spec/template/spec/containers/{index}"
    tests: list[dict[str, Any]] = []
    generation = (deployment.get("metadata") or {}).get("generation")
    if generation is not None:
        tests.append({"op": "test", "path": "/metadata/generation", "value": generation})
    for field in ("command", "args"):
        if field in container:
            tests.append({"op": "test", "path": f"{base}/{field}", "value": list(container[field])})
    return tests


async def _what_changed(plan: Plan, clients: Clients) -> str:
    """Each planned `test` value that no longer holds, as `PATH: planned → now`."""
    kube = await clients.kube_writer()
    now = await kube.get_deployment(plan.target.namespace or "", plan.target.name)
    changes = []
    for pre in plan.preconditions:
        current = value_at(now, pre.what)
        if current != pre.expected:
            if isinstance(pre.expected, list) and isinstance(current, list):
                added = [a for a in current if a not in pre.expected]
                gone = [a for a in pre.expected if a not in current]
                parts = [f"added {added}" if added else "", f"removed {gone}" if gone else ""]
                changes.append(f"{pre.what}: {', '.join(p for p in parts if p) or 'reordered'}")
            else:
                changes.append(f"{pre.what}: {pre.expected!r} → {current!r}")
    return "; ".join(changes) or "the patch's test failed"


def _generation(obj: dict[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("generation")


ACTION = SetMaxNumSeqs()
