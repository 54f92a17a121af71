"""vLLM's rules around `--max-num-seqs`: its default, and what a change must respect. Pure.

* **Default.** When a container does not set it, vLLM's `EngineArgs.get_batch_defaults`
  (vllm/engine/arg_utils.py) picks 1024 for the OpenAI server on a GPU with at least 70 GiB
  that is not an A100 (H100, H200, MI300), else 256, then clamps it to
  `--max-num-batched-tokens` (`SchedulerConfig.DEFAULT_MAX_NUM_SEQS = 128` is only a testing
  fallback). `default_max_num_seqs` computes that from what a cluster says about the GPU: the
  node labels of NVIDIA GPU feature discovery (`nvidia.com/gpu.product`,
  `nvidia.com/gpu.memory` in MiB, on the node or in the pod's nodeSelector) or DCGM's
  `modelName` and FB_USED+FB_FREE+FB_RESERVED; unknown gives "256 or 1024 depending on GPU".
* **--max-num-active-seqs** (vllm PR #56758) caps RUNNING admission and must be
  ≤ `--max-num-seqs`: vLLM raises ValueError at start-up otherwise, so a Deployment patched to a
  `--max-num-seqs` below it never becomes Ready. `max_num_seqs_change_problems` lists every
  reason a change to `new_value` must be refused in the preview; `change_both_patch` is the
  guarded JSON patch that lowers both when the person confirms that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oncall.model.kube_expansion import Env
from oncall.model.patches import Op, find_container, max_num_seqs_patch
from oncall.model.patches import _flag_test as flag_test  # the same guard for the second flag
from oncall.model.vllm_args import (
    ACTIVE_FLAG,
    FLAG,
    MaxNumSeqs,
    parse_max_num_active_seqs,
    parse_max_num_seqs,
)

GIB_MIB = 1024
#: `device_memory >= 70 * GiB_bytes` in get_batch_defaults, in MiB.
LARGE_GPU_MIB = 70 * GIB_MIB
LARGE_DEFAULT, SMALL_DEFAULT = 1024, 256
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
_GB_IN_NAME = re.compile(r"(\d+)\s*GB", re.IGNORECASE)


@dataclass(frozen=True)
class DefaultMaxNumSeqs:
    """vLLM's default for this GPU (None when the GPU is not known) and how we know."""

    value: int | None
    explanation: str

    def text(self) -> str:
        """For a probe's facts and an evidence line: `default: 1024 (H100 80GB, node label …)`."""
        if self.value is None:
            return (
                f"default: {SMALL_DEFAULT} or {LARGE_DEFAULT} depending on GPU ({self.explanation})"
            )
        return f"default: {self.value} ({self.explanation})"


def default_max_num_seqs(
    product: str | None,
    memory_mib: float | None,
    *,
    source: str,
    max_num_batched_tokens: int | None = None,
) -> DefaultMaxNumSeqs:
    """The `--max-num-seqs` vLLM's OpenAI server uses when the flag is unset.

    `product` is the GPU's name (GFD's `NVIDIA-H100-80GB-HBM3`, DCGM's `NVIDIA H100 80GB HBM3`),
    `memory_mib` its total memory; without `memory_mib`, the "NNGB" in the product name is
    used. `source` says where they came from, for the explanation.
    """
    name = (product or "").strip()
    memory, memory_from = memory_mib, "memory"
    if memory is None and name:
        found = _GB_IN_NAME.search(name)
        if found:
            memory, memory_from = int(found.group(1)) * GIB_MIB, "the product name"
    if memory is None or memory <= 0:
        what = f"GPU {name}, memory unknown" if name else "GPU model and memory unknown"
        return DefaultMaxNumSeqs(None, f"{what}; from {source}")
    large = memory >= LARGE_GPU_MIB and "a100" not in name.lower()
    value = LARGE_DEFAULT if large else SMALL_DEFAULT
    why = f"{name or 'GPU'} with {memory / GIB_MIB:.0f} GiB ({memory_from} from {source}): " + (
        "≥ 70 GiB, not an A100" if large else "an A100" if memory >= LARGE_GPU_MIB else "< 70 GiB"
    )
    if max_num_batched_tokens is not None and max_num_batched_tokens < value:
        value = max_num_batched_tokens
        why += f", clamped to --max-num-batched-tokens {max_num_batched_tokens}"
    return DefaultMaxNumSeqs(value, why)


def default_from_labels(labels: Mapping[str, str] | None, source: str) -> DefaultMaxNumSeqs:
    """`default_max_num_seqs` from GPU feature discovery labels (a node's, or a nodeSelector)."""
    labels = labels or {}
    memory: float | None
    try:
        memory = float(labels[MEMORY_LABEL]) if MEMORY_LABEL in labels else None
    except ValueError:
        memory = None
    return default_max_num_seqs(labels.get(PRODUCT_LABEL), memory, source=source)


def _parsed(container: Mapping[str, Any]) -> tuple[MaxNumSeqs, MaxNumSeqs]:
    env = Env.of_container(container)
    command, args = container.get("command"), container.get("args")
    return parse_max_num_seqs(command, args, env), parse_max_num_active_seqs(command, args, env)


def max_num_seqs_change_problems(
    container: Mapping[str, Any], new_value: int, *, change_both: bool = False
) -> list[str]:
    """Every reason to refuse setting `--max-num-seqs` of this container spec to `new_value`
    (empty: the change may be previewed). With `change_both`, a `--max-num-active-seqs` above
    `new_value` is lowered with it, so it is no reason, unless it cannot be edited."""
    if isinstance(new_value, bool) or not isinstance(new_value, int) or new_value < 1:
        return [f"max-num-seqs must be a positive integer, not {new_value!r}"]
    seqs, active = _parsed(container)
    problems: list[str] = []
    if seqs.edit_problem:
        problems.append(seqs.edit_problem)
    elif seqs.problem:
        problems.append(f"{FLAG} cannot be changed: {seqs.problem}")
    if active.problem:
        problems.append(f"{ACTIVE_FLAG} cannot be checked against the new value: {active.problem}")
    elif active.form == "config":
        problems.append(
            f"{ACTIVE_FLAG} may be set in the config file {active.config_file}, which oncall "
            f"does not read: check it is ≤ {new_value} there first"
        )
    elif active.value is not None and new_value < active.value:
        if not change_both:
            problems.append(
                f"{FLAG} {new_value} is below {ACTIVE_FLAG} {active.value}, which must be ≤ "
                f"{FLAG} (vLLM refuses to start otherwise): choose {active.value} or more, or "
                f"confirm lowering both to {new_value}"
            )
        elif not active.editable:
            why = active.edit_problem or "its value cannot be located"
            problems.append(f"{ACTIVE_FLAG} cannot be lowered with it: {why}")
    return problems


def change_both_patch(
    deployment: Mapping[str, Any], container: str | None, new_value: int
) -> list[Op]:
    """The guarded JSON patch that sets `--max-num-seqs` to `new_value` and lowers
    `--max-num-active-seqs` to `new_value` when it is above; ValueError says why not.

    When both flags sit in one element (an `sh -c` script), that element is replaced once with
    both values changed. The ops test the container name and every element they replace.
    """
    index, found = find_container(deployment, container)
    problems = max_num_seqs_change_problems(found, new_value, change_both=True)
    if problems:
        raise ValueError("; ".join(problems))
    ops = max_num_seqs_patch(deployment, container, new_value)
    seqs, active = _parsed(found)
    if active.value is None or active.value <= new_value:
        return ops
    pointer = active.json_pointer(index)
    if seqs.field == active.field and seqs.index == active.index:
        assert seqs.span is not None and active.span is not None and active.text is not None
        spans = sorted([seqs.span, active.span], reverse=True)
        text = active.text
        for start, end in spans:  # right to left, so the left span stays where it was
            text = f"{text[:start]}{new_value}{text[end:]}"
        return [op if op["op"] == "test" else {**op, "value": text} for op in ops]
    return [
        *ops[:-1],
        *flag_test(found, active, index),
        {"op": "test", "path": pointer, "value": active.text},
        ops[-1],
        {"op": "replace", "path": pointer, "value": active.rewrite(new_value)},
    ]


def active_facts(container: Mapping[str, Any]) -> dict[str, Any]:
    """`max_num_active_seqs` facts of one container spec, for the Deployment probe."""
    _, active = _parsed(container)
    return {"max_num_active_seqs": active.value, "max_num_active_seqs_form": active.form}
