"""JSON patches (RFC 6902) that change vLLM's `--max-num-seqs` in a Deployment; pure, no I/O.

vLLM has no runtime knob for the value (reference/backends.md §1.6): a change is a Deployment
patch and a rollout. The patch changes exactly one element of the container's `command` or
`args`, in whatever form it is written (`--max-num-seqs=256`, `--max-num-seqs 256`,
`--max_num_seqs 256`, inside an `sh -c` script), and guards it with `test` ops: the container's
name, the flag element (form "separate") and the element itself as it is now. The apiserver
applies a JSON patch atomically, so if anything moved or changed since the Deployment was read
the whole patch fails (422) and nothing changes:

    [{"op": "test", "path": "/spec/template/spec/containers/0/name", "value": "vllm"},
     {"op": "test", "path": "/spec/template/spec/containers/0/args/2", "value": "--max-num-seqs"},
     {"op": "test", "path": "/spec/template/spec/containers/0/args/3", "value": "256"},
     {"op": "replace", "path": "/spec/template/spec/containers/0/args/3", "value": "128"}]

`inverse_patch` turns such a patch into its rollback (test the new text, put the old one back).
A value that lives only in a `--config` file, or nowhere (vLLM's default), cannot be patched
in place: `max_num_seqs_patch` raises ValueError saying what to do instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oncall.model.kube_expansion import Env
from oncall.model.vllm_args import FLAG, MaxNumSeqs, parse_max_num_seqs

Op = dict[str, Any]
CONTAINERS = "/spec/template/spec/containers"


def find_container(
    deployment: Mapping[str, Any], container: str | None
) -> tuple[int, Mapping[str, Any]]:
    """(index, container) of the named container; with None, the only one, or the only one
    that sets `--max-num-seqs`. ValueError names the containers there are."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    name = (deployment.get("metadata") or {}).get("name", "?")
    names = ", ".join(str(c.get("name")) for c in containers) or "none"
    if container is not None:
        for index, found in enumerate(containers):
            if found.get("name") == container:
                return index, found
        raise ValueError(f"Deployment {name} has no container {container!r} (it has: {names})")
    if len(containers) == 1:
        return 0, containers[0]
    setting = [(index, c) for index, c in enumerate(containers) if _parse(c).form != "default"]
    if len(setting) == 1:
        return setting[0]
    raise ValueError(f"Deployment {name} has containers {names}: say which one runs vLLM")


def max_num_seqs_patch(
    deployment: Mapping[str, Any], container: str | None, new_value: int
) -> list[Op]:
    """The guarded JSON patch that sets `--max-num-seqs` to `new_value` in `container`.

    The last occurrence is changed (argparse keeps the last). Raises ValueError when the value
    cannot be changed in place: only in a config file, not set at all, not a literal integer,
    already `new_value`, or `new_value` not a positive integer.
    """
    if isinstance(new_value, bool) or not isinstance(new_value, int) or new_value < 1:
        raise ValueError(f"max-num-seqs must be a positive integer, not {new_value!r}")
    index, found = find_container(deployment, container)
    name = str(found.get("name"))
    parsed = _parse(found)
    if parsed.form == "config":
        raise ValueError(
            f"{FLAG} is set only in the config file {parsed.config_file}; change it there, or "
            f"add {FLAG}={new_value} to the args of container {name!r} (they override the file)"
        )
    if parsed.form == "default":
        raise ValueError(
            f"{FLAG} is not set in the container args of {name!r} (vLLM picks a GPU-dependent "
            f"default); add it to the Deployment's args, e.g. {FLAG}={new_value}"
        )
    if parsed.problem or not parsed.editable or parsed.text is None:
        why = parsed.problem or parsed.edit_problem or "its value cannot be located"
        raise ValueError(f"{FLAG} of container {name!r} cannot be patched: {why}")
    if parsed.value == new_value:
        raise ValueError(f"{FLAG} of container {name!r} is already {new_value}")
    pointer = parsed.json_pointer(index)
    return [
        {"op": "test", "path": f"{CONTAINERS}/{index}/name", "value": name},
        *_flag_test(found, parsed, index),
        {"op": "test", "path": pointer, "value": parsed.text},
        {"op": "replace", "path": pointer, "value": parsed.rewrite(new_value)},
    ]


def inverse_patch(ops: Sequence[Mapping[str, Any]]) -> list[Op]:
    """The rollback of a patch made of `test` and `replace` ops.

    Each replaced path must have a `test` op holding its old value: the inverse tests the new
    value there and replaces it with the old one; other `test` ops stay as they are.
    """
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}
    for op in ops:
        kind, path = op.get("op"), op.get("path")
        if not isinstance(path, str) or kind not in ("test", "replace") or "value" not in op:
            raise ValueError(f"cannot invert {dict(op)!r}: only test and replace ops with a value")
        if kind == "test" and path not in new:
            old.setdefault(path, op["value"])
        elif kind == "replace":
            if path not in old:
                raise ValueError(f"cannot invert the replace of {path}: no test holds its value")
            new[path] = op["value"]
    if not new:
        raise ValueError("the patch replaces nothing: there is nothing to roll back")
    inverse: list[Op] = []
    for op in ops:
        path = str(op["path"])
        if op["op"] == "test":
            inverse.append({"op": "test", "path": path, "value": new.get(path, op["value"])})
        else:
            inverse.append({"op": "replace", "path": path, "value": old[path]})
    return inverse


def _parse(container: Mapping[str, Any]) -> MaxNumSeqs:
    # With the container's env: a `$(VAR)` value is then read, and refused for editing with
    # the reason (edit_problem), instead of looking like a non-integer.
    env = Env.of_container(container)
    return parse_max_num_seqs(container.get("command"), container.get("args"), env)


def _flag_test(container: Mapping[str, Any], parsed: MaxNumSeqs, index: int) -> list[Op]:
    """For form "separate": a `test` that the flag still precedes the value."""
    if parsed.form != "separate" or parsed.field is None or parsed.index is None:
        return []
    field, position = parsed.field, parsed.index - 1
    if position < 0:  # the value opens `args`: the flag closes `command`
        if field != "args" or not container.get("command"):
            return []
        field, position = "command", len(container["command"]) - 1
    element = (container.get(field) or [])[position]
    return [{"op": "test", "path": f"{CONTAINERS}/{index}/{field}/{position}", "value": element}]


def value_at(obj: Any, pointer: str) -> Any:
    """The value at a JSON pointer (RFC 6901); None when absent."""
    for raw in pointer.lstrip("/").split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        elif isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            return None
    return obj
