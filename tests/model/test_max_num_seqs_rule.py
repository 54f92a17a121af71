"""vLLM's `--max-num-seqs` default (get_batch_defaults) and the `--max-num-active-seqs` bound a
change must respect (vllm PR #56758), on Deployments shaped like the apiserver's."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from oncall.model.max_num_seqs_rule import (
    change_both_patch,
    default_from_labels,
    default_max_num_seqs,
    max_num_seqs_change_problems,
)
from oncall.model.patches import inverse_patch, max_num_seqs_patch
from oncall.model.vllm_args import parse_max_num_active_seqs, parse_max_num_seqs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes"


def deployment(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def with_args(args: list[str], env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "vllm", "image": "vllm/vllm-openai", "args": args}
    if env is not None:
        container["env"] = env
    return {
        "metadata": {"name": "vllm"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def apply(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """A minimal RFC 6902 test/replace, enough to check the ops do what they say."""
    out = copy.deepcopy(doc)
    for op in ops:
        *parents, last = op["path"].strip("/").split("/")
        node: Any = out
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = int(last) if isinstance(node, list) else last
        if op["op"] == "test":
            assert node[key] == op["value"], op
        else:
            node[key] = op["value"]
    return out


@pytest.mark.parametrize(
    ("product", "memory", "value"),
    [
        ("NVIDIA-H100-80GB-HBM3", 81559.0, 1024),
        ("NVIDIA-H200", 143771.0, 1024),
        ("NVIDIA-A100-SXM4-80GB", 81920.0, 256),  # large, but an A100
        ("NVIDIA-L40S", 46068.0, 256),
        ("NVIDIA-H100-80GB-HBM3", None, 1024),  # memory from the product name
        ("Tesla-T4", None, None),
        (None, None, None),
    ],
)
def test_default_follows_get_batch_defaults(
    product: str | None, memory: float | None, value: int | None
) -> None:
    found = default_max_num_seqs(product, memory, source="node labels")
    assert found.value == value
    assert "node labels" in found.explanation
    if value is None:
        assert found.text().startswith("default: 256 or 1024 depending on GPU")
    else:
        assert found.text().startswith(f"default: {value} (")


def test_default_is_clamped_to_max_num_batched_tokens() -> None:
    found = default_max_num_seqs(
        "NVIDIA H100 80GB HBM3", 81559, source="DCGM", max_num_batched_tokens=512
    )
    assert found.value == 512 and "clamped" in found.explanation


def test_default_from_the_recorded_node_selector() -> None:
    labels = deployment("deployment_vllm_env_active.json")["spec"]["template"]["spec"][
        "nodeSelector"
    ]
    found = default_from_labels(labels, "the pod's nodeSelector (GPU feature discovery labels)")
    assert found.value == 1024 and "NVIDIA-H100-80GB-HBM3" in found.explanation
    assert default_from_labels({"nvidia.com/gpu.memory": "lots"}, "node").value is None


def test_a_value_below_active_seqs_is_refused_with_the_reason() -> None:
    container = with_args(["--max-num-seqs", "256", "--max-num-active-seqs", "128"])
    spec = container["spec"]["template"]["spec"]["containers"][0]
    problems = max_num_seqs_change_problems(spec, 64)
    assert len(problems) == 1
    assert "below --max-num-active-seqs 128" in problems[0] and "refuses to start" in problems[0]
    assert max_num_seqs_change_problems(spec, 128) == []
    assert max_num_seqs_change_problems(spec, 64, change_both=True) == []


@pytest.mark.parametrize(
    ("args", "env", "why"),
    [
        (["--max-num-seqs", "$(N)"], [{"name": "N", "value": "256"}], "comes from $(N)"),
        (["--max-num-seqs", "256", "--max-num-active-seqs", "$(A)"], [], "cannot be checked"),
        (["--max-num-seqs", "256", "--config", "/etc/vllm.yaml"], [], "config file"),
        (["--max-num", "256"], [], "ambiguous"),
    ],
)
def test_changes_that_cannot_be_checked_or_made_are_refused(
    args: list[str], env: list[dict[str, Any]], why: str
) -> None:
    spec = with_args(args, env)["spec"]["template"]["spec"]["containers"][0]
    problems = max_num_seqs_change_problems(spec, 64)
    assert any(why in p for p in problems), problems


def test_non_positive_values_are_refused() -> None:
    spec = with_args(["--max-num-seqs", "256"])["spec"]["template"]["spec"]["containers"][0]
    assert max_num_seqs_change_problems(spec, 0) and max_num_seqs_change_problems(spec, True)


def test_change_both_in_separate_elements_and_its_rollback() -> None:
    doc = deployment("deployment_vllm_env_active.json")
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["args"][3] = "--max-num-seqs=256"  # a literal value: editable
    ops = change_both_patch(doc, None, 32)
    patched = apply(doc, ops)
    new = patched["spec"]["template"]["spec"]["containers"][0]
    env = None
    assert parse_max_num_seqs(new["command"], new["args"], env).value == 32
    assert parse_max_num_active_seqs(new["command"], new["args"], env).value == 32
    assert [op["op"] for op in ops].count("replace") == 2
    assert apply(patched, inverse_patch(ops)) == doc


def test_change_both_in_one_shell_element() -> None:
    doc = deployment("deployment_vllm_shell_both.json")
    ops = change_both_patch(doc, "vllm", 64)
    patched = apply(doc, ops)
    script = patched["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert (
        script
        == "exec vllm serve $(MODEL_ID) --max-num-active-seqs 64 --max-num-seqs=64 --port 8000"
    )
    assert [op["op"] for op in ops].count("replace") == 1
    assert apply(patched, inverse_patch(ops)) == doc


def test_change_both_leaves_a_lower_active_value_alone() -> None:
    doc = deployment("deployment_vllm_shell_both.json")
    ops = change_both_patch(doc, "vllm", 200)
    script = apply(doc, ops)["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--max-num-active-seqs 192 --max-num-seqs=200" in script


def test_change_both_refuses_a_value_from_env() -> None:
    with pytest.raises(ValueError, match=r"\$\(MAX_SEQS\)"):
        change_both_patch(deployment("deployment_vllm_env_active.json"), None, 32)


def test_the_plain_patch_refuses_a_value_from_env_with_the_reason() -> None:
    """What `set-max-num-seqs` previews today on the recorded Deployment: refused, saying why."""
    with pytest.raises(ValueError, match=r"comes from \$\(MAX_SEQS\).*change the env value"):
        max_num_seqs_patch(deployment("deployment_vllm_env_active.json"), None, 64)
