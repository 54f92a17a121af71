"""The REST verbs of the simulated apiserver, generic over resource types.

get / list (label + field selectors, limit/continue) / create / update / patch / delete, each with
the apiserver's semantics: resourceVersion as an optimistic lock, delete preconditions (uid,
resourceVersion), `dryRun=All` (everything is checked, nothing is stored), metadata.generation
bumped on spec changes, status kept out of main-resource writes, and graceful pod deletion.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from oncall_drill.kube_sim import errors, listing, patch, podstatus
from oncall_drill.kube_sim.errors import ApiError
from oncall_drill.kube_sim.resources import (
    DEPLOYMENTS,
    HPAS,
    NAMESPACES,
    NODES,
    PODS,
    REPLICASETS,
    ResourceType,
)
from oncall_drill.kube_sim.store import Obj, now_rfc3339
from oncall_drill.kube_sim.validation import validate

if TYPE_CHECKING:
    from oncall_drill.kube_sim.sim import KubeSim

_STATUS_KEPT = frozenset(
    {DEPLOYMENTS.kind, REPLICASETS.kind, PODS.kind, NODES.kind, NAMESPACES.kind, HPAS.kind}
)
_SPEC_GENERATION = frozenset({DEPLOYMENTS.kind, REPLICASETS.kind})
_NS_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)


def parse_dry_run(values: list[str]) -> bool:
    for value in values:
        if value != "All":
            raise errors.bad_request(f'Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def get(sim: KubeSim, rt: ResourceType, namespace: str | None, name: str) -> Obj:
    obj = sim.store.get(rt, namespace, name)
    if obj is None:
        raise errors.not_found(rt, name)
    return obj


def list_(sim: KubeSim, rt: ResourceType, namespace: str | None, query: Mapping[str, str]) -> Obj:
    return listing.list_objects(sim.store, rt, namespace, query)


def create(
    sim: KubeSim, rt: ResourceType, namespace: str | None, body: Any, *, dry_run: bool
) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}'
        )
    body_ns = (body.get("metadata") or {}).get("namespace")
    if rt.namespaced:
        if body_ns and body_ns != namespace:
            raise errors.bad_request(_NS_MISMATCH)
        if not sim.store.exists(NAMESPACES, None, namespace or ""):
            raise errors.not_found(NAMESPACES, namespace or "")
    prepared = sim.store.prepare_create(rt, body, namespace)
    validate(rt, prepared)
    name = prepared["metadata"]["name"]
    if sim.store.exists(rt, namespace, name):
        raise errors.already_exists(rt, name)
    if dry_run:
        return prepared
    return sim.store.create(rt, prepared, namespace)


def _store_update(sim: KubeSim, rt: ResourceType, old: Obj, new: Any, *, dry_run: bool) -> Obj:
    """The common tail of update and patch: preconditions, managed fields, validation, write."""
    if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
        raise errors.bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}'
        )
    old_meta, new_meta = old["metadata"], new["metadata"]
    name = old_meta["name"]
    if new_meta.get("name", name) != name:
        raise errors.bad_request(
            f"the name of the object ({new_meta.get('name')}) "
            f"does not match the name on the URL ({name})"
        )
    if rt.namespaced and new_meta.get("namespace", old_meta["namespace"]) != old_meta["namespace"]:
        raise errors.bad_request(_NS_MISMATCH)
    rv = new_meta.get("resourceVersion")
    if rv and rv != old_meta["resourceVersion"]:
        raise errors.conflict_modified(rt, name)
    uid = new_meta.get("uid")
    if uid and uid != old_meta["uid"]:
        raise ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {rt.qualified} "{name}": Precondition failed: '
            f"UID in precondition: {uid}, UID in object meta: {old_meta['uid']}",
            {"name": name, "kind": rt.plural, **({"group": rt.group} if rt.group else {})},
        )
    new = copy.deepcopy(new)
    new["apiVersion"], new["kind"] = rt.api_version, rt.kind
    for key in (
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
        "resourceVersion",
    ):
        if key in old_meta:
            new["metadata"][key] = old_meta[key]
        else:
            new["metadata"].pop(key, None)
    if rt.kind in _STATUS_KEPT:
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    if rt.kind in _SPEC_GENERATION and new.get("spec") != old.get("spec"):
        new["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
    validate(rt, new)
    result: Obj = new
    if result == old or dry_run:
        return result
    return sim.store.replace(rt, result)


def update(
    sim: KubeSim, rt: ResourceType, namespace: str | None, name: str, body: Any, *, dry_run: bool
) -> Obj:
    old = get(sim, rt, namespace, name)
    return _store_update(sim, rt, old, body, dry_run=dry_run)


def patch_(
    sim: KubeSim,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    *,
    raw: bytes,
    content_type: str,
    dry_run: bool,
) -> Obj:
    media = content_type.split(";", maxsplit=1)[0].strip().lower()
    if media not in (patch.JSON_PATCH, patch.MERGE_PATCH, patch.STRATEGIC_MERGE_PATCH):
        raise errors.unsupported_media_type(media)
    try:
        body = json.loads(raw or b"null")
    except ValueError as exc:
        raise errors.bad_request(f"error decoding patch: {exc}") from exc
    old = get(sim, rt, namespace, name)
    try:
        if media == patch.JSON_PATCH:
            new = patch.apply_json_patch(old, body)
        elif not isinstance(body, dict):
            raise errors.bad_request(
                "json: cannot unmarshal array into Go value of type map[string]interface {}"
            )
        elif media == patch.MERGE_PATCH:
            new = patch.apply_merge_patch(old, body)
        else:
            new = patch.apply_strategic_merge_patch(old, body)
    except patch.PatchMalformed as exc:
        raise errors.bad_request(str(exc)) from exc
    except patch.PatchNotApplicable as exc:
        raise errors.json_patch_failed() from exc
    return _store_update(sim, rt, old, new, dry_run=dry_run)


def _delete_options(body: Any, query: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if "gracePeriodSeconds" in query:
        try:
            options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
        except ValueError as exc:
            raise errors.bad_request(
                f"invalid gracePeriodSeconds {query['gracePeriodSeconds']!r}"
            ) from exc
    if body is not None:
        if not isinstance(body, dict):
            raise errors.bad_request(
                'DeleteOptions in version "v1" cannot be handled as a DeleteOptions'
            )
        options.update({k: v for k, v in body.items() if v is not None})
    return options


def delete(
    sim: KubeSim,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    *,
    body: Any,
    query: Mapping[str, str],
    dry_run: bool,
) -> Obj:
    options = _delete_options(body, query)
    obj = get(sim, rt, namespace, name)
    meta = obj["metadata"]
    pre = options.get("preconditions") or {}
    if pre.get("uid") and pre["uid"] != meta["uid"]:
        raise errors.conflict_uid_precondition(rt, name, pre["uid"], meta["uid"])
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
        raise errors.conflict_rv_precondition(
            rt, namespace or "", name, pre["resourceVersion"], meta["resourceVersion"]
        )
    if rt is not PODS:
        if not dry_run:
            sim.store.delete(rt, namespace, name)
        return errors.success_status(rt, name, meta["uid"])
    grace = options.get("gracePeriodSeconds")
    if grace is None:
        grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
    if not isinstance(grace, int) or grace < 0:
        grace = 0
    if dry_run:
        if not podstatus.is_terminating(obj):
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = grace
        return obj
    return sim.controller.kubelet.begin_delete(obj, grace)
