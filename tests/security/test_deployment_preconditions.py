"""Threat: a concurrent Deployment change slips between preview and confirmation (issue 12,
item 12): another arg appended, or a new generation, without touching the tested element.

Against the drill's Kubernetes API through the set-max-num-seqs action and KubeWriter: the
plan's patch tests the generation and the whole args list; after someone else's change the
re-check refuses and says what changed, and the patch itself is refused by the apiserver
(RFC 6902 is atomic: nothing of ours is applied).
"""

from __future__ import annotations

from typing import Any

import pytest

from oncall.errors import BackendError
from oncall.remediation.actions.set_max_num_seqs import ACTION as SET_SEQS
from tests.drill.kube.conftest import ARGS, NS, Cluster, kube_clients, vllm_args


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ([{"op": "add", "path": f"{ARGS}/-", "value": "--enable-prefix-caching"}],
         f"{ARGS}: added ['--enable-prefix-caching']"),
        ([{"op": "replace", "path": "/spec/revisionHistoryLimit", "value": 3}],
         "/metadata/generation: "),
    ],
    ids=["arg appended", "new generation"],
)  # fmt: skip
async def test_a_change_between_preview_and_confirmation_refuses_and_says_what(
    drill: Cluster, change: list[dict[str, Any]], said: str
) -> None:
    drill.ready_pods(2)
    async with kube_clients(drill) as c:
        plan = await SET_SEQS.plan(SET_SEQS.params(deployment="vllm", value=64), c)
        assert await SET_SEQS.changed_since_plan(plan, c) is None
        kube = await c.kube_writer()
        await kube.patch_deployment_json(NS, "vllm", change, dry_run=False)  # someone else
        theirs = await vllm_args(c)
        why = await SET_SEQS.changed_since_plan(plan, c)
        assert why is not None and why.startswith("the Deployment's args changed since the preview")
        assert said in why
        with pytest.raises(BackendError) as refused:
            await SET_SEQS.execute(plan, c)  # even if a caller skipped the re-check
        assert refused.value.reason == "invalid"
        assert await vllm_args(c) == theirs  # nothing of ours applied
