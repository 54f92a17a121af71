"""The three PATCH dialects of the apiserver: JSON patch, JSON merge patch, strategic merge.

JSON patch follows RFC 6902 through the `jsonpatch` library, on a copy (so a failing `test`
leaves the object untouched). Merge patch follows RFC 7386. Strategic merge knows the merge keys
of the lists the simulator serves (containers merge by `name`, ports by `containerPort`, ...);
every other list, `args` included, is replaced wholesale, as the real apiserver does.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

# Field name -> merge key, from the patchMergeKey tags of k8s.io/api.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "ownerReferences": "uid",
    "taints": "key",
    "addresses": "type",
}


class PatchMalformed(Exception):
    """The patch document itself is not valid (400)."""


class PatchNotApplicable(Exception):
    """A JSON patch operation that does not apply to this object (422)."""


def apply_json_patch(doc: dict[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 patch (with the `jsonpatch` library) to a copy of doc; doc is unchanged.

    Errors are sorted the way the apiserver sorts them: a patch that is not a list of operations,
    or an operation without its members, is malformed (400); an operation that does not apply to
    this object (a failing `test`, a missing path, an index out of bounds) is 422.
    """
    if not isinstance(ops, list):
        raise PatchMalformed("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        result: Any = jsonpatch.apply_patch(doc, ops, in_place=False)
    except jsonpatch.InvalidJsonPatch as exc:
        raise PatchMalformed(str(exc)) from exc
    except jsonpatch.JsonPatchTestFailed as exc:
        # evanphx/json-patch's words, which the apiserver wraps: "testing value PATH failed".
        path = getattr(exc.op, "location", None) or "?"
        raise PatchNotApplicable(f"testing value {path} failed: test failed") from exc
    except (jsonpatch.JsonPatchConflict, jsonpointer.JsonPointerException) as exc:
        raise PatchNotApplicable(str(exc)) from exc
    if not isinstance(result, dict):
        raise PatchNotApplicable("the patched document is not an object")
    return result


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def apply_strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch over the merge keys in MERGE_KEYS; returns a new value."""
    return _smp_value(target, patch, field="")


def _smp_value(target: Any, patch: Any, *, field: str) -> Any:
    if isinstance(patch, dict):
        if patch.get("$patch") == "replace":
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        if patch.get("$patch") == "delete":
            return None
        result = copy.deepcopy(target) if isinstance(target, dict) else {}
        for key, value in patch.items():
            if key.startswith("$"):
                continue  # $retainKeys, $setElementOrder/...: ordering hints we do not need
            if value is None:
                result.pop(key, None)
                continue
            merged = _smp_value(result.get(key), value, field=key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        return result
    if isinstance(patch, list) and field in MERGE_KEYS and isinstance(target, list):
        return _smp_list(target, patch, MERGE_KEYS[field])
    return copy.deepcopy(patch)


def _smp_list(target: list[Any], patch: list[Any], key: str) -> list[Any]:
    result = copy.deepcopy(target)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchMalformed(f"map: {item!r} does not contain declared merge key: {key}")
        directive = item.get("$patch")
        position = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, dict) and old.get(key) == item[key]
            ),
            None,
        )
        if directive == "delete":
            if position is not None:
                result.pop(position)
        elif position is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if not k.startswith("$")})
        else:
            result[position] = _smp_value(result[position], item, field="")
    return result
