"""`GET /api/v1/namespaces/NS/pods/NAME/log`: a container's log, as the apiserver serves it.

The apiserver checks the pod and the container, then the kubelet picks the container instance by
ID: the current one (`status.containerStatuses[].containerID`) or, with `previous=true`, the last
terminated one (`lastState.terminated.containerID`). The pod hook that ran the process keeps its
output per container ID (`ContainerLogs`); a hook that keeps none serves empty logs, as a
container that printed nothing does.

Query parameters (core/v1 PodLogOptions): `container`, `previous`, `tailLines` (the last N
lines), `limitBytes` (at most N bytes, counted from the start of what tailLines kept). The
answer is `text/plain`. Failures are the apiserver's, with its messages (pkg/registry/core/pod
`LogLocation`, pkg/kubelet `validateContainerLogStatus`):

- tailLines < 0 or limitBytes < 1: 422 `PodLogOptions "NAME" is invalid: tailLines: Invalid
  value: -1: must be greater than or equal to 0` (checked before the pod);
- unknown pod: 404 `pods "NAME" not found`;
- unknown container: 400 `container C is not valid for pod NAME`;
- several containers, none named: 400 `a container name must be specified for pod NAME,
  choose one of: [a b]`;
- `previous=true` without a terminated instance: 400
  `previous terminated container "C" in pod "NAME" not found`;
- a container not started yet: 400 `container "C" in pod "NAME" is waiting to start: REASON`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from oncall_drill.kube_sim import errors
from oncall_drill.kube_sim.resources import PODS
from oncall_drill.kube_sim.store import Obj


@runtime_checkable
class ContainerLogs(Protocol):
    """What a pod hook implements to serve logs: the output of one container instance."""

    def container_log(self, container_id: str) -> bytes | None:
        """Everything the instance with this containerID wrote (None: nothing recorded)."""
        ...


def _bool(query: Mapping[str, str], key: str) -> bool:
    value = query.get(key, "false").lower()
    if value not in ("true", "false", "1", "0", ""):
        raise errors.bad_request(f'invalid boolean value for {key}: "{query.get(key)}"')
    return value in ("true", "1")


def _count(query: Mapping[str, str], key: str, minimum: int, name: str) -> int | None:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None
    if value < minimum:  # ValidatePodLogOptions, wrapped in NewInvalid(Kind PodLogOptions)
        detail = f"must be greater than or equal to {minimum}"
        cause = {"reason": "FieldValueInvalid", "message": f"Invalid value: {value}: {detail}",
                 "field": key}  # fmt: skip
        raise errors.ApiError(
            422,
            "Invalid",
            f'PodLogOptions "{name}" is invalid: {key}: Invalid value: {value}: {detail}',
            {"name": name, "kind": "PodLogOptions", "causes": [cause]},
        )
    return value


def tail(text: bytes, lines: int | None) -> bytes:
    """The last `lines` lines of text (all of it when None)."""
    if lines is None:
        return text
    if lines == 0:
        return b""
    kept = text.splitlines(keepends=True)[-lines:]
    return b"".join(kept)


def _container_name(pod: Obj, wanted: str | None) -> str:
    name = str(pod["metadata"]["name"])
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if wanted:
        if wanted not in names:
            raise errors.bad_request(f"container {wanted} is not valid for pod {name}")
        return wanted
    if len(names) == 1:
        return names[0]
    raise errors.bad_request(
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
    )


def _container_id(pod: Obj, container: str, previous: bool) -> str:
    name = str(pod["metadata"]["name"])
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    status: dict[str, Any] = next((s for s in statuses if s.get("name") == container), {})
    if previous:
        terminated = (status.get("lastState") or {}).get("terminated")
        if not terminated:
            raise errors.bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        return str(terminated.get("containerID") or "")
    waiting = (status.get("state") or {}).get("waiting")
    if not status or waiting:
        reason = (waiting or {}).get("reason") or "ContainerCreating"
        raise errors.bad_request(
            f'container "{container}" in pod "{name}" is waiting to start: {reason}'
        )
    return str(status.get("containerID") or "")


def pod_log(
    pod: Obj | None, name: str, query: Mapping[str, str], source: ContainerLogs | None
) -> bytes:
    """The body of a pod log request (raises ApiError as the apiserver answers): the options
    are validated first, then the pod and the container are looked up."""
    previous = _bool(query, "previous")
    lines = _count(query, "tailLines", 0, name)
    limit = _count(query, "limitBytes", 1, name)
    if pod is None:
        raise errors.not_found(PODS, name)
    container = _container_name(pod, query.get("container"))
    container_id = _container_id(pod, container, previous)
    text = (source.container_log(container_id) if source is not None else None) or b""
    text = tail(text, lines)
    return text if limit is None else text[:limit]
