"""Guarded JSON patches for `--max-num-seqs` in every form, applied with the drill simulator's
RFC 6902 implementation: they change exactly the value, fail on a changed Deployment, and
invert into their rollback."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from oncall.model.patches import find_container, inverse_patch, max_num_seqs_patch
from oncall.model.vllm_args import parse_max_num_seqs
from oncall_drill.kube_sim.patch import PatchNotApplicable, apply_json_patch
from oncall_drill.kube_sim.seed import vllm_deployment

C0 = "/spec/template/spec/containers/0"


def deployment(
    args: list[str] | None = None, command: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    dep = vllm_deployment()
    container = dep["spec"]["template"]["spec"]["containers"][0]
    container.pop("args")
    if args is not None:
        container["args"] = args
    if command is not None:
        container["command"] = command
    container.update(extra)
    return dep


def container_of(dep: dict[str, Any], index: int = 0) -> dict[str, Any]:
    found: dict[str, Any] = dep["spec"]["template"]["spec"]["containers"][index]
    return found


def effective(dep: dict[str, Any], index: int = 0) -> int | None:
    c = container_of(dep, index)
    return parse_max_num_seqs(c.get("command"), c.get("args")).value


def test_separate_form_tests_name_flag_and_value() -> None:
    dep = deployment(["--model", "qwen", "--max-num-seqs", "256"])
    ops = max_num_seqs_patch(dep, "vllm", 128)
    assert ops == [
        {"op": "test", "path": f"{C0}/name", "value": "vllm"},
        {"op": "test", "path": f"{C0}/args/2", "value": "--max-num-seqs"},
        {"op": "test", "path": f"{C0}/args/3", "value": "256"},
        {"op": "replace", "path": f"{C0}/args/3", "value": "128"},
    ]
    patched = apply_json_patch(dep, ops)
    assert container_of(patched)["args"] == ["--model", "qwen", "--max-num-seqs", "128"]


@pytest.mark.parametrize(
    ("args", "index", "old", "new"),
    [
        (["--model", "q", "--max-num-seqs=256"], 2, "--max-num-seqs=256", "--max-num-seqs=64"),
        (["--max_num_seqs=256", "--port", "8000"], 0, "--max_num_seqs=256", "--max_num_seqs=64"),
        (["--max-num_seqs=256"], 0, "--max-num_seqs=256", "--max-num_seqs=64"),
    ],
)
def test_equals_forms_keep_the_flag_as_written(
    args: list[str], index: int, old: str, new: str
) -> None:
    ops = max_num_seqs_patch(deployment(args), "vllm", 64)
    assert ops[1:] == [
        {"op": "test", "path": f"{C0}/args/{index}", "value": old},
        {"op": "replace", "path": f"{C0}/args/{index}", "value": new},
    ]


def test_underscore_separate_form() -> None:
    dep = deployment(["--max_num_seqs", "256"])
    ops = max_num_seqs_patch(dep, None, 32)
    assert ops[1] == {"op": "test", "path": f"{C0}/args/0", "value": "--max_num_seqs"}
    assert container_of(apply_json_patch(dep, ops))["args"] == ["--max_num_seqs", "32"]


def test_flag_at_the_end_of_command_and_value_in_args() -> None:
    dep = deployment(["96", "--port", "1"], command=["vllm", "serve", "q", "--max-num-seqs"])
    ops = max_num_seqs_patch(dep, "vllm", 48)
    assert ops[1] == {"op": "test", "path": f"{C0}/command/3", "value": "--max-num-seqs"}
    assert ops[-1] == {"op": "replace", "path": f"{C0}/args/0", "value": "48"}
    assert effective(apply_json_patch(dep, ops)) == 48


def test_shell_script_changes_only_the_value_span() -> None:
    script = "exec vllm serve qwen --trust-remote-code --max_num_seqs 256 --port 8000"
    dep = deployment([script], command=["/bin/sh", "-c"])
    ops = max_num_seqs_patch(dep, "vllm", 64)
    assert ops[1:] == [
        {"op": "test", "path": f"{C0}/args/0", "value": script},
        {"op": "replace", "path": f"{C0}/args/0", "value": script.replace("256", "64")},
    ]
    quoted = deployment(['vllm serve q --max-num-seqs="256"'], command=["bash", "-ec"])
    patched = apply_json_patch(quoted, max_num_seqs_patch(quoted, None, 8))
    assert container_of(patched)["args"] == ['vllm serve q --max-num-seqs="8"']


def test_the_last_occurrence_is_the_one_changed() -> None:
    dep = deployment(["--max-num-seqs", "256", "--max-num-seqs=512"])
    patched = apply_json_patch(dep, max_num_seqs_patch(dep, "vllm", 128))
    assert container_of(patched)["args"] == ["--max-num-seqs", "256", "--max-num-seqs=128"]
    assert effective(patched) == 128


def test_a_changed_deployment_fails_the_test_and_nothing_changes() -> None:
    dep = deployment(["--model", "qwen", "--max-num-seqs", "256"])
    ops = max_num_seqs_patch(dep, "vllm", 128)
    for change in (
        lambda c: c["args"].__setitem__(3, "200"),  # someone changed the value
        lambda c: c["args"].insert(0, "--trust-remote-code"),  # the args moved
        lambda c: c.__setitem__("name", "sidecar"),  # another container at index 0
    ):
        moved = copy.deepcopy(dep)
        change(container_of(moved))
        with pytest.raises(PatchNotApplicable):
            apply_json_patch(moved, ops)


def test_config_file_only_says_where_to_change_it() -> None:
    dep = deployment(["--config", "/etc/vllm/config.yaml"])
    with pytest.raises(ValueError, match="set only in the config file") as err:
        max_num_seqs_patch(dep, "vllm", 64)
    assert str(err.value).startswith(
        "--max-num-seqs is set only in the config file /etc/vllm/config.yaml; change it there"
    )
    assert "--max-num-seqs=64" in str(err.value)


def test_missing_flag_says_to_add_it() -> None:
    with pytest.raises(ValueError, match="not set in the container args") as err:
        max_num_seqs_patch(deployment(["--model", "qwen"]), "vllm", 64)
    assert "add it" in str(err.value)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--max-num-seqs", "$(MAX_SEQS)"], "not a literal integer"),
        (["--max-num-seqs"], "has no value"),
        (["--max-num-seqs 256"], "share one element"),
    ],
)
def test_values_that_cannot_be_edited(args: list[str], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        max_num_seqs_patch(deployment(args), "vllm", 64)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "64"])
def test_new_value_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        max_num_seqs_patch(deployment(["--max-num-seqs=256"]), "vllm", bad)


def test_same_value_is_refused() -> None:
    with pytest.raises(ValueError, match="already 256"):
        max_num_seqs_patch(deployment(["--max-num-seqs=256"]), "vllm", 256)


def test_container_choice() -> None:
    dep = deployment(["--max-num-seqs=256"])
    sidecar = {"name": "proxy", "image": "envoy", "args": ["--port", "9000"]}
    dep["spec"]["template"]["spec"]["containers"].insert(0, sidecar)
    assert find_container(dep, None)[0] == 1  # the only one that sets the flag
    ops = max_num_seqs_patch(dep, None, 128)
    assert ops[0] == {
        "op": "test",
        "path": "/spec/template/spec/containers/1/name",
        "value": "vllm",
    }
    with pytest.raises(ValueError, match=r"no container 'engine' \(it has: proxy, vllm\)"):
        max_num_seqs_patch(dep, "engine", 128)
    container_of(dep, 0)["args"] = ["--max-num-seqs", "8"]
    with pytest.raises(ValueError, match="say which one"):
        find_container(dep, None)


def test_inverse_patch_rolls_back() -> None:
    dep = deployment(["--model", "qwen", "--max-num-seqs", "256"])
    ops = max_num_seqs_patch(dep, "vllm", 128)
    back = inverse_patch(ops)
    assert back == [
        ops[0],
        ops[1],
        {"op": "test", "path": f"{C0}/args/3", "value": "128"},
        {"op": "replace", "path": f"{C0}/args/3", "value": "256"},
    ]
    patched = apply_json_patch(dep, ops)
    assert apply_json_patch(patched, back) == dep
    with pytest.raises(PatchNotApplicable):  # not applied yet: nothing to roll back
        apply_json_patch(dep, back)


def test_inverse_needs_the_old_value() -> None:
    with pytest.raises(ValueError, match="no test holds its value"):
        inverse_patch([{"op": "replace", "path": "/a", "value": 1}])
    with pytest.raises(ValueError, match="only test and replace"):
        inverse_patch([{"op": "remove", "path": "/a"}])
    with pytest.raises(ValueError, match="nothing to roll back"):
        inverse_patch([{"op": "test", "path": "/a", "value": 1}])
