"""The simulator's in-memory object store (its etcd).

Objects are plain JSON dicts in their apiVersion's wire form. Every write bumps one global
resourceVersion, as etcd's revision does; reads hand out deep copies so that nobody mutates the
store behind its back. Listeners hear about every change (the controller wakes up on them).
"""

from __future__ import annotations

import bisect
import builtins
import copy
import random
import secrets
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from oncall_drill.kube_sim.errors import already_exists
from oncall_drill.kube_sim.resources import ResourceType

Obj = dict[str, Any]
Listener = Callable[[str, ResourceType, Obj], None]

# The apiserver's name-suffix alphabet (no vowels, no confusable digits).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATION_KINDS = frozenset({"Deployment", "ReplicaSet"})


def now_rfc3339() -> str:
    """metav1.Time: seconds precision, UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """metav1.MicroTime: exactly six fractional digits."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: Where generated names' suffixes come from; `seed_names` makes them a fixed sequence.
_names: random.Random = secrets.SystemRandom()


def seed_names(seed: int) -> None:
    """Generated names from a fixed sequence: `drill up --contexts` gives every stack the same
    seed, so the same pods have the same names in each cluster (as one Deployment rolled out
    to two regions would not, but a test needs them alike to show which one an action hit)."""
    global _names  # noqa: PLW0603 - one generator for the process, set once at start
    _names = random.Random(seed)  # noqa: S311 - names, not secrets


def random_suffix(length: int = 5) -> str:
    return "".join(_names.choice(_SUFFIX_ALPHABET) for _ in range(length))


def meta(obj: Obj) -> dict[str, Any]:
    """obj["metadata"], created if missing."""
    metadata = obj.setdefault("metadata", {})
    assert isinstance(metadata, dict)
    return metadata


class Store:
    """All objects of the simulated cluster, keyed by resource, namespace and name."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self._revision = 1000
        self._listeners: list[Listener] = []
        # Sorted keys per table, rebuilt after a create or delete: a list of 5,000 pods must not
        # sort them on every request.
        self._sorted: dict[str, list[tuple[str, str]]] = {}
        #: The newest revision etcd has compacted away (continue tokens at or below it expire).
        self.compacted_revision = 0
        # The revision of the last write per (resource, namespace) and per resource, so that
        # the controllers can skip a pass over thousands of objects nobody changed.
        self._changed: dict[tuple[str, str | None], int] = {}

    def changed(self, rt: ResourceType, namespace: str | None = None) -> int:
        """The revision of the last write to rt (in namespace, or anywhere); 0: none yet."""
        return self._changed.get((rt.qualified, namespace), 0)

    def _touch(self, rt: ResourceType, obj: Obj) -> str:
        revision = self._next_rv()
        ns = meta(obj).get("namespace") or ""
        self._changed[(rt.qualified, ns)] = self._changed[(rt.qualified, None)] = self._revision
        return revision

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify(self, event: str, rt: ResourceType, obj: Obj) -> None:
        for listener in list(self._listeners):
            listener(event, rt, obj)

    @property
    def resource_version(self) -> str:
        return str(self._revision)

    def _next_rv(self) -> str:
        self._revision += 1
        return str(self._revision)

    def _table(self, rt: ResourceType) -> dict[tuple[str, str], Obj]:
        return self._objects.setdefault(rt.qualified, {})

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        found = self._table(rt).get((namespace or "", name))
        return copy.deepcopy(found) if found is not None else None

    def _keys(self, rt: ResourceType) -> builtins.list[tuple[str, str]]:
        keys = self._sorted.get(rt.qualified)
        if keys is None:
            keys = self._sorted[rt.qualified] = sorted(self._table(rt))
        return keys

    def scan(
        self, rt: ResourceType, namespace: str | None = None, start: tuple[str, str] | None = None
    ) -> Iterator[Obj]:
        """The stored objects themselves, in key order (namespace, name), from `start` on.

        Read-only: callers must not change them (copy what you keep or write back)."""
        table, keys = self._table(rt), self._keys(rt)
        first = bisect.bisect_left(keys, (namespace, "")) if namespace is not None else 0
        if start is not None:
            first = max(first, bisect.bisect_left(keys, start))
        for key in keys[first:]:
            if namespace is not None and key[0] != namespace:
                return
            found = table.get(key)
            if found is not None:
                yield found

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        keep: Callable[[Obj], bool] | None = None,
    ) -> builtins.list[Obj]:
        """Copies of the objects (in key order) that `keep` accepts; filtering comes before the
        copy, so a selective list of a big table copies only what it returns."""
        return [copy.deepcopy(o) for o in self.scan(rt, namespace) if keep is None or keep(o)]

    def compact(self, revision: int | None = None) -> None:
        """Forget history up to revision (default: now), as etcd's compaction does."""
        self.compacted_revision = self._revision if revision is None else revision

    def exists(self, rt: ResourceType, namespace: str | None, name: str) -> bool:
        return (namespace or "", name) in self._table(rt)

    def prepare_create(
        self, rt: ResourceType, obj: Obj, namespace: str | None, *, owned: bool = False
    ) -> Obj:
        """The object as a create would store it (generated name, uid, timestamps); not stored.

        owned: obj is the caller's fresh object, handed over (no copy)."""
        new = obj if owned else copy.deepcopy(obj)
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        metadata = meta(new)
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = f"{metadata['generateName']}{random_suffix()}"
        if rt.namespaced:
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = now_rfc3339()
        metadata["resourceVersion"] = self.resource_version
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            metadata.pop(key, None)
        if rt.kind in _GENERATION_KINDS:
            metadata["generation"] = 1
        return new

    def create(
        self, rt: ResourceType, obj: Obj, namespace: str | None = None, *, owned: bool = False
    ) -> Obj:
        """Store a new object (AlreadyExists if the name is taken); returns a copy.

        owned: obj is handed over and stored as it is (a seed of thousands of fresh objects);
        the object stored is returned, not a copy: read it, do not change it."""
        ns = namespace if namespace is not None else meta(obj).get("namespace")
        new = self.prepare_create(rt, obj, ns, owned=owned)
        key = (ns or "", str(meta(new)["name"]))
        if key in self._table(rt):
            raise already_exists(rt, key[1])
        meta(new)["resourceVersion"] = self._touch(rt, new)
        self._table(rt)[key] = new
        self._sorted.pop(rt.qualified, None)
        self._notify("ADDED", rt, new)
        return new if owned else copy.deepcopy(new)

    def replace(self, rt: ResourceType, obj: Obj) -> Obj:
        """Store a new version of an existing object, bumping its resourceVersion."""
        new = copy.deepcopy(obj)
        metadata = meta(new)
        key = (metadata.get("namespace") or "", str(metadata["name"]))
        if key not in self._table(rt):
            raise KeyError(key)
        metadata["resourceVersion"] = self._touch(rt, new)
        self._table(rt)[key] = new
        self._notify("MODIFIED", rt, new)
        return copy.deepcopy(new)

    def delete(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        removed = self._table(rt).pop((namespace or "", name), None)
        if removed is None:
            return None
        self._sorted.pop(rt.qualified, None)
        meta(removed)["resourceVersion"] = self._touch(rt, removed)
        self._notify("DELETED", rt, removed)
        return copy.deepcopy(removed)

    def dump(self) -> builtins.list[Obj]:
        """Every object, for a snapshot of the cluster."""
        return [copy.deepcopy(o) for table in self._objects.values() for o in table.values()]
