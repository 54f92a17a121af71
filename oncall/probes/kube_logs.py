"""The `kube.logs` probe: a container's log tail, as `kubectl logs --previous` shows it.

    kubectl logs POD -n NS -c CONTAINER --previous --tail=N --limit-bytes=B

It reads the pod (its container's termination and memory limit), then the log of the last
terminated instance (or the current one): bounded in lines and bytes, every line redacted of
secrets before it becomes a fact (`oncall.probes.kube_log_facts`). A checklist decides on
`match` (the last line matching its pattern, e.g. CUDA out-of-memory signatures),
`terminated_reason` (OOMKilled is the kernel's host-memory kill) and `last_error_line`.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from oncall.backends.kube import BACKEND, KubeReader, Obj
from oncall.model.linear_regex import RegexError, compile_linear
from oncall.probes import kube_log_facts as logs
from oncall.probes.base import Facts, Probe
from oncall.probes.context import ProbeContext
from oncall.probes.kube import NamespacedParams, _namespace, kube_reader, kubectl


class LogsParams(NamespacedParams):
    pod: str | None = Field(None, description="Pod name; empty: the latest-terminated pod.")
    selector: str | None = Field(None, description="Without pod: the pods to choose among.")
    container: str | None = Field(None, description="Container; default the pod's first.")
    previous: bool = Field(True, description="The last terminated instance (kubectl -p).")
    tail_lines: int = Field(200, ge=1, le=2000, description="Last N lines (kubectl --tail).")
    limit_bytes: int = Field(262_144, ge=1024, le=4_194_304, description="At most B bytes.")
    pattern: str | None = Field(
        None, description="Regex (RE2: linear time); facts.match is its last line."
    )
    skip: str | None = Field(
        None,
        description="Regex (RE2) of error lines that are consequences: last_error_line skips them.",
    )

    @field_validator("pattern", "skip")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile_linear(value)  # RE2: a log a backend wrote cannot make it backtrack
            except RegexError as exc:
                raise ValueError(str(exc)) from None
        return value


async def _log_target(
    reader: KubeReader, namespace: str, params: LogsParams
) -> tuple[Obj | None, str | None]:
    """(the pod to read, why there is none)."""
    if params.pod:
        return await reader.get_pod(namespace, params.pod), None
    pods = await reader.list_pods(namespace, params.selector)
    pod = logs.latest_terminated(pods, params.container)
    scope = f"-l {params.selector}" if params.selector else f"in {namespace}"
    return pod, None if pod else f"no pod {scope} has a terminated container"


async def run_logs(ctx: ProbeContext, params: LogsParams) -> Facts:
    """Facts of `kubectl logs POD -c C --previous --tail=N` (and of the pod it reads):

    - `pod`, `container`, `previous`; `found` (a log was read), `reason` (why not: no such
      container, no terminated instance, no pod terminated; None when found).
    - `terminated_reason` ("OOMKilled", "Error", "Completed": how vLLM ends after an engine
      death once started, vllm issue #48966, …), `terminated_exit_code`, `terminated_at`:
      the termination of the instance whose log this is (None for a running one).
    - `memory_limit` (the container's limit as the spec writes it, "64Gi"; None: unlimited),
      `memory_limit_bytes`.
    - `lines` (the last `tail_lines`, secrets redacted, each at most 600 characters),
      `line_count`, `bytes` (received), `truncated` (limit_bytes reached).
    - `match` (the last line matching `pattern`; None), `match_count`; `last_error_line` (the
      last exception line such as "torch.OutOfMemoryError: …", else the last ERROR line; lines
      matching `skip` only when no other error line is left).

    Without `pod`, the pod of `selector` whose container terminated last is read. An unknown
    pod is a "not found" error; a pod without a previous instance is `found` false, and the
    log's facts are then listed in `absent` (fact -> "no log read: <reason>").
    """
    reader = await kube_reader(ctx)
    namespace = _namespace(ctx, params)
    pod, reason = await _log_target(reader, namespace, params)
    facts: Facts = {
        "pod": None, "container": None, "previous": params.previous, "found": False,
        "reason": reason, "terminated_reason": None, "terminated_exit_code": None,
        "terminated_at": None, "memory_limit": None, "memory_limit_bytes": None, "lines": [],
        "line_count": 0, "bytes": 0, "truncated": False, "match": None, "match_count": 0,
        "last_error_line": None, "absent": {},
    }  # fmt: skip
    if pod is None:
        return _unread(facts)
    name = str((pod.get("metadata") or {}).get("name"))
    container = logs.container_name(pod, params.container)
    facts["pod"] = name
    if container is None:
        facts["reason"] = f"pod {name} has no container {params.container or ''}".rstrip()
        return _unread(facts)
    terminated = logs.termination(pod, container, params.previous)
    limit = logs.memory_limit(pod, container)
    facts.update(
        container=container,
        terminated_reason=(terminated or {}).get("reason"),
        terminated_exit_code=(terminated or {}).get("exitCode"),
        terminated_at=(terminated or {}).get("finishedAt"),
        memory_limit=limit,
        memory_limit_bytes=logs.quantity_bytes(limit),
    )
    if params.previous and terminated is None:  # the API would answer 400: do not ask
        facts["reason"] = f"container {container} of pod {name} has no previous instance"
        return _unread(facts)
    text = await reader.read_pod_log(
        namespace,
        name,
        container,
        previous=params.previous,
        tail_lines=params.tail_lines,
        limit_bytes=params.limit_bytes,
    )
    lines = logs.log_lines(text, params.tail_lines)
    size = len(text.encode("utf-8", errors="replace"))
    pattern = compile_linear(params.pattern) if params.pattern else None
    match, count = logs.last_match(lines, pattern)
    facts.update(
        found=True,
        reason=None,
        lines=lines,
        line_count=len(lines),
        bytes=size,
        truncated=size >= params.limit_bytes,
        match=match,
        match_count=count,
        last_error_line=logs.last_error_line(
            lines, compile_linear(params.skip) if params.skip else None
        ),
    )
    return facts


#: What is read from the log itself: not seen when no log was read.
LOG_FACTS = ("lines", "line_count", "match", "match_count", "last_error_line")


def _unread(facts: Facts) -> Facts:
    """No log read: its facts are absent, with why (`oncall.checklist.absence`), not "no
    match"."""
    facts["absent"] = dict.fromkeys(LOG_FACTS, f"no log read: {facts['reason']}")
    return facts


def logs_equivalent(ctx: ProbeContext, params: LogsParams) -> str:
    words = ["logs", params.pod or "POD", "-n", _namespace(ctx, params)]
    if params.container:
        words += ["-c", params.container]
    if params.previous:
        words.append("--previous")
    words += [f"--tail={params.tail_lines}", f"--limit-bytes={params.limit_bytes}"]
    return kubectl(ctx, *words)


PROBES = (
    Probe(
        name="kube.logs",
        backend=BACKEND,
        summary="A container's log tail (--previous by default), redacted, with its exit.",
        params=LogsParams,
        run=run_logs,
        equivalent=logs_equivalent,
        absent_facts=frozenset(LOG_FACTS),
    ),
)
