"""The three PATCH dialects of the apiserver: JSON patch, JSON merge patch, strategic merge.

JSON patch follows RFC 6902 (atomic: a failing `test` leaves the object untouched). Merge patch
follows RFC 7386. Strategic merge knows the merge keys of the lists the simulator serves (containers
merge by `name`, ports by `containerPort`, ...); every other list, `args` included, is replaced
wholesale, as the real apiserver does.
"""

from __future__ import annotations

import copy
from typing import Any

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


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchNotApplicable(f"invalid JSON pointer {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if token == "-" and for_add:  # noqa: S105 - "-" is RFC 6901's end-of-array token
        return len(container)
    if not token.isdigit():
        raise PatchNotApplicable(f"invalid array index {token!r}")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise PatchNotApplicable(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict):
            if token not in current:
                raise PatchNotApplicable("missing path")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, for_add=False)]
        else:
            raise PatchNotApplicable("missing path")
    return current


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchNotApplicable(f"missing path {path}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise PatchNotApplicable(f"missing path {path}")


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise PatchNotApplicable("cannot remove the document root")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchNotApplicable(f"missing path {path}")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, for_add=False))
    raise PatchNotApplicable(f"missing path {path}")


def _add(doc: Any, path: str, value: Any, *, replace: bool) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchNotApplicable(
                f"replace operation does not apply: doc is missing key: {path}"
            )
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, for_add=False)] = value
        else:
            parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise PatchNotApplicable(f"missing path {path}")
    return doc


def apply_json_patch(doc: dict[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 patch to a copy of doc; doc itself is never changed."""
    if not isinstance(ops, list):
        raise PatchMalformed("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    result: Any = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise PatchMalformed("invalid JSON patch operation")
        kind, path = op.get("op"), op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchMalformed(f"missing value for {kind} operation")
        if kind == "add":
            result = _add(result, path, copy.deepcopy(op["value"]), replace=False)
        elif kind == "replace":
            result = _add(result, path, copy.deepcopy(op["value"]), replace=True)
        elif kind == "remove":
            _remove(result, path)
        elif kind == "test":
            if _get(result, path) != op["value"]:
                raise PatchNotApplicable(f"testing value {path} failed: test failed")
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchMalformed(f"missing from for {kind} operation")
            value = (
                _remove(result, source) if kind == "move" else copy.deepcopy(_get(result, source))
            )
            result = _add(result, path, value, replace=False)
        else:
            raise PatchMalformed(f"Unexpected kind: {kind}")
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
