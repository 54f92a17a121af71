"""`list` with the apiserver's paging: limit, opaque continue tokens, expiry, resourceVersion.

Continue tokens are the ones k8s.io/apiserver `pkg/storage/continue.go` encodes: unpadded
URL-safe base64 of `{"v":"meta.k8s.io/v1","rv":<list revision>,"start":"<next key>"}`, the key
relative to the list's etcd prefix (`/registry/pods/<ns>/`), the next key being the last
returned one plus a NUL byte, as the etcd3 store writes it. A token that does not decode is a 400
(`invalid continue token: ...`, storage.ValidateListOptions); one whose revision the store has
compacted is a 410 `Expired` with an "inconsistent" token (rv -1) in the Status' metadata that
resumes at the same key (etcd3 `interpretListError`). `remainingItemCount` is set only when the
list has no selector (the etcd3 store cannot count matches it has not read).

Unlike etcd the simulator keeps no history: a continued list reads the objects as they are now
(as an rv -1 "inconsistent" continue would), while it still answers with the first page's
revision.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from oncall_drill.kube_sim import errors
from oncall_drill.kube_sim.errors import ApiError
from oncall_drill.kube_sim.resources import ResourceType, allowed_field_selectors
from oncall_drill.kube_sim.selectors import make_filter
from oncall_drill.kube_sim.store import Obj, Store

TOKEN_VERSION = "meta.k8s.io/v1"  # noqa: S105 - the token format version, no secret
# k8s.io/apiserver pkg/storage/etcd3/errors.go
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)
EXPIRED_LIST = "The resourceVersion for the provided list is too old."
_TYPE_KEYS = frozenset({"kind", "apiVersion"})
_B64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def key_prefix(rt: ResourceType, namespace: str | None) -> str:
    """The etcd key prefix of a list (`/registry/pods/ai/`, `/registry/nodes/`)."""
    return f"/registry/{rt.plural}/{namespace}/" if namespace else f"/registry/{rt.plural}/"


def encode_continue(start: str, revision: int) -> str:
    raw = json.dumps({"v": TOKEN_VERSION, "rv": revision, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _invalid_token(why: str) -> ApiError:
    return errors.bad_request(f"invalid continue token: continue key is not valid{why}")


def decode_continue(token: str) -> tuple[str, int]:
    """(start key relative to the prefix, revision); a 400 with upstream's reasons otherwise."""
    raw = token.encode()
    bad = next((i for i, byte in enumerate(raw) if byte not in _B64), None)
    if bad is None and len(raw) % 4 == 1:
        bad = len(raw) - 1
    if bad is not None:
        raise _invalid_token(f": illegal base64 data at input byte {bad}")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(raw + b"=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise _invalid_token(f": {exc}") from None
    if not isinstance(decoded, dict):
        raise _invalid_token(": json: cannot unmarshal into Go value of type storage.continueToken")
    if decoded.get("v") != TOKEN_VERSION:
        raise _invalid_token(
            f": server does not recognize this encoded version {decoded.get('v') or ''}"
        )
    revision, start = decoded.get("rv"), decoded.get("start")
    if not isinstance(revision, int) or revision == 0:
        raise _invalid_token(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not isinstance(start, str) or not start:
        raise _invalid_token(": encoded start key empty (version meta.k8s.io/v1)")
    if ".." in start.split("/") or start.startswith("/"):
        raise _invalid_token(f": {start}")  # path.Clean would change it: a traversal attempt
    return start, revision


def _key_of(rt: ResourceType, namespace: str | None, start: str) -> tuple[str, str]:
    """The store key (namespace, name) a start key names; "name\\x00" sorts just after "name"."""
    name = start
    if namespace is not None or not rt.namespaced:
        return (namespace or "", name)
    ns, _, rest = name.partition("/")
    return (ns, rest)


def _limit(query: Mapping[str, str]) -> int:
    text = query.get("limit") or "0"
    try:
        return max(int(text), 0)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def list_objects(
    store: Store, rt: ResourceType, namespace: str | None, query: Mapping[str, str]
) -> Obj:
    """The List document a GET of a collection answers.

    Its items share their insides with the store: serialize it before the next write."""
    label_selector, field_selector = query.get("labelSelector"), query.get("fieldSelector")
    keep = make_filter(label_selector, field_selector, allowed_field_selectors(rt))
    limit, token = _limit(query), query.get("continue") or ""
    revision = int(store.resource_version)
    after: tuple[str, str] | None = None  # the first key of the page
    if token:
        if query.get("resourceVersion") not in (None, "", "0"):
            raise errors.bad_request(
                "specifying resource version is not allowed when using continue"
            )
        start, token_rv = decode_continue(token)
        if 0 < token_rv <= store.compacted_revision:
            raise expired_continue(start)
        revision = token_rv if token_rv > 0 else revision
        after = _key_of(rt, namespace, start)
    elif query.get("resourceVersionMatch") == "Exact":
        wanted = int(query.get("resourceVersion") or 0)
        if wanted <= store.compacted_revision:
            raise ApiError(410, "Expired", EXPIRED_LIST)
    items: list[Obj] = []
    more, remaining = False, 0
    counted = not label_selector and not field_selector
    scanned = store.scan(rt, namespace, start=after)
    for obj in scanned:
        if not keep(obj):
            continue
        if limit and len(items) == limit:
            more = True
            if counted:
                remaining = 1 + sum(1 for _ in scanned)
            break
        items.append(obj)
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if more:
        last = items[-1]["metadata"]
        name = (
            last["name"]
            if namespace is not None or not rt.namespaced
            else (f"{last['namespace']}/{last['name']}")
        )
        metadata["continue"] = encode_continue(name + "\x00", revision)
        if counted:
            metadata["remainingItemCount"] = remaining
    # List items carry no kind/apiVersion on the wire; the list does. Shallow copies: the
    # server serializes the page before anything else runs (a deep copy of 5,000 pods costs
    # more than the request).
    page = [{k: v for k, v in item.items() if k not in _TYPE_KEYS} for item in items]
    return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": metadata, "items": page}


def expired_continue(start: str) -> ApiError:
    err = ApiError(410, "Expired", INCONSISTENT_CONTINUE)
    err.list_continue = encode_continue(start, -1)
    return err
