"""set-max-num-seqs: patch vLLM's `--max-num-seqs` in a Deployment's args; follow the rollout.

Plan: the Deployment, the current value in whatever form its args hold it, and the JSON patch
(`test` ops on the exact elements, then `replace`; oncall/model/patches.py). The `test` ops are
the plan's preconditions: the apiserver refuses the whole patch when any of them moved.

Command-line equivalents: `kubectl patch deployment NAME --type=json -p OPS --dry-run=server`,
the patch, `kubectl rollout status deployment NAME`, and the new pods' args.
"""

from __future__ import annotations

from typing import Any

from oncall.errors import BackendError
from oncall.model.action_params import SetMaxNumSeqsParams
from oncall.model.patches import find_container, max_num_seqs_patch
from oncall.model.vllm_args import parse_max_num_seqs
from oncall.model.write_path import Plan, Precondition, Target
from oncall.remediation.action import Action, PlanError, Say
from oncall.remediation.clients import Clients

ROLLOUT_TIMEOUT_S = 180.0


class SetMaxNumSeqs(Action[SetMaxNumSeqsParams]):
    name = "set-max-num-seqs"
    params = SetMaxNumSeqsParams

    async def plan(self, params: SetMaxNumSeqsParams, clients: Clients) -> Plan:
        namespace = params.namespace or clients.settings.kubernetes.namespace
        kube = await clients.kube_writer()
        deployment = await kube.get_deployment(namespace, params.deployment)
        try:
            ops = max_num_seqs_patch(deployment, params.container, params.value)
            _, container = find_container(deployment, params.container)
        except ValueError as exc:
            raise PlanError(f"set-max-num-seqs on {namespace}/{params.deployment}: {exc}") from exc
        parsed = parse_max_num_seqs(container.get("command") or [], container.get("args") or [])
        meta = deployment.get("metadata") or {}
        target = Target(
            "Deployment", params.deployment, namespace, meta.get("uid"), meta.get("resourceVersion")
        )
        return Plan(
            action=self.name,
            params=params.model_dump(exclude_none=True),
            target=target,
            before=f"--max-num-seqs {parsed.value} ({parsed.form} form, "
            f"container {container.get('name')})",
            after=f"--max-num-seqs {params.value}, rolled out to every pod",
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
            else {**params.model_dump(exclude_none=True), "value": parsed.value},
            preconditions=tuple(
                Precondition(op["path"], op["value"]) for op in ops if op["op"] == "test"
            ),
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
                return "the Deployment's args changed since the preview (the patch's test failed)"
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


def _generation(obj: dict[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("generation")


ACTION = SetMaxNumSeqs()
