"""set-max-num-seqs respects `--max-num-active-seqs` (issue 16, point 4), against the drill's
Kubernetes API through the real client: vLLM refuses to start with `--max-num-active-seqs`
above `--max-num-seqs`, so a value below it is refused in the preview with the reason, and
`change_both` lowers both in one guarded patch."""

from __future__ import annotations

from oncall.model.vllm_args import parse_max_num_active_seqs, parse_max_num_seqs
from oncall.remediation.actions.set_max_num_seqs import ACTION as SET_SEQS
from oncall.remediation.clients import Clients
from tests.drill.kube.conftest import ARGS, NS, Cluster, kube_clients, vllm_args


async def _with_active(c: Clients, active: int) -> None:
    kube = await c.kube_writer()
    add = [{"op": "add", "path": f"{ARGS}/-", "value": f"--max-num-active-seqs={active}"}]
    await kube.patch_deployment_json(NS, "vllm", add, dry_run=False)


async def test_a_value_below_max_num_active_seqs_is_refused_in_the_preview(
    drill: Cluster,
) -> None:
    drill.ready_pods(2)
    async with kube_clients(drill) as c:
        await _with_active(c, 128)
        plan = await SET_SEQS.plan(SET_SEQS.params(deployment="vllm", value=64), c)
        refused = [v for v in plan.checks if not v.ok]
        assert [v.guard for v in refused] == ["max-num-active-seqs"]
        assert "64 is below --max-num-active-seqs 128" in refused[0].reason
        assert "--max-num-active-seqs 128" in plan.before
        # At or above it, the check passes and names the bound.
        plan = await SET_SEQS.plan(SET_SEQS.params(deployment="vllm", value=128), c)
        assert [(v.ok, v.reason) for v in plan.checks] == [
            (True, "--max-num-active-seqs 128 ≤ 128")
        ]


async def test_change_both_lowers_both_flags_in_one_patch(drill: Cluster) -> None:
    drill.ready_pods(2)
    async with kube_clients(drill) as c:
        await _with_active(c, 128)
        params = SET_SEQS.params(deployment="vllm", value=64, change_both=True)
        plan = await SET_SEQS.plan(params, c)
        assert all(v.ok for v in plan.checks)
        assert "--max-num-active-seqs 64" in plan.after
        assert plan.undo is not None and plan.undo["value"] == 256
        await SET_SEQS.dry_run(plan, c)  # the apiserver accepts the patch (dry run)
        await SET_SEQS.execute(plan, c)
        args = await vllm_args(c)
        assert parse_max_num_seqs(None, args).value == 64
        assert parse_max_num_active_seqs(None, args).value == 64


async def test_without_max_num_active_seqs_nothing_changes(drill: Cluster) -> None:
    drill.ready_pods(2)
    async with kube_clients(drill) as c:
        plan = await SET_SEQS.plan(SET_SEQS.params(deployment="vllm", value=64), c)
        assert [(v.ok, v.reason) for v in plan.checks] == [(True, "--max-num-active-seqs unset")]
        assert all("max-num-active-seqs" not in str(op.get("value")) for op in plan.request["body"])
