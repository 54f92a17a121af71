"""The revert watch: what a plan set, when it is undone, and that the watch ends on time."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from oncall.errors import BackendError
from oncall.model.write_path import Plan, Target
from oncall.remediation.revert_watch import (
    Expected,
    RevertWatch,
    applied_values,
    undone,
    watch,
)

ARGS = "/spec/template/spec/containers/0/args"


def _plan(body: Any) -> Plan:
    return Plan(
        action="set-max-num-seqs",
        params={},
        target=Target("Deployment", "vllm", "ai", None, None),
        before="",
        after="",
        request={"method": "PATCH", "path": "/x", "body": body},
        dangerous=True,
        confirm_word="vllm",
    )


def _deployment(value: str) -> dict[str, Any]:
    args = ["--model", "qwen", "--max-num-seqs", value]
    return {"spec": {"template": {"spec": {"containers": [{"args": args}]}}}}


def test_a_json_patch_sets_its_replace_and_add_values_not_its_tests_or_appends() -> None:
    body = [
        {"op": "test", "path": "/metadata/generation", "value": 3},
        {"op": "test", "path": f"{ARGS}/3", "value": "256"},
        {"op": "replace", "path": f"{ARGS}/3", "value": "128"},
        {"op": "add", "path": f"{ARGS}/-", "value": "--x"},
    ]
    assert applied_values(_plan(body)) == (Expected(f"{ARGS}/3", "128"),)


def test_a_merge_patch_sets_its_leaves() -> None:
    expected = applied_values(
        _plan({"spec": {"replicas": 3}, "metadata": {"labels": {"a/b": "1"}}})
    )
    assert expected == (Expected("/spec/replicas", 3), Expected("/metadata/labels/a~1b", "1"))


def test_undone_names_the_path_the_value_set_and_the_value_now() -> None:
    expected = (Expected(f"{ARGS}/3", "128"),)
    assert undone(_deployment("128"), expected) == ()
    assert undone(_deployment("256"), expected) == (
        {"path": f"{ARGS}/3", "set": "128", "now": "256"},
    )
    # The args rebuilt shorter (the element gone) is a revert too.
    assert undone({"spec": {}}, expected)[0]["now"] is None


def _armed(seconds: float, interval: float = 0.001) -> RevertWatch:
    return RevertWatch("a1", _plan([]), (Expected(f"{ARGS}/3", "128"),), seconds, (), interval)


def test_a_revert_is_seen_on_the_first_read_after_it() -> None:
    answers = iter([_deployment("128"), _deployment("128"), _deployment("256")])
    reads = 0

    async def read() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return next(answers)

    result = asyncio.run(watch(_armed(60), read, lambda _line: None))
    assert result.reverted and reads == 3
    assert "REVERTED" in result.message and "'128' -> '256'" in result.message


def test_the_watch_stops_at_its_time_limit_with_a_bounded_number_of_reads() -> None:
    ticks = itertools.count()
    reads = 0

    async def read() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return _deployment("128")  # never reverted

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    # A clock that moves 1 s per look: a 10 s watch is over after about 10 looks.
    result = asyncio.run(
        watch(_armed(10, interval=1.0), read, lambda _l: None,
              clock=lambda: float(next(ticks)), sleep=sleep)
    )  # fmt: skip
    assert not result.reverted and result.message == "not reverted within 10s"
    assert 0 < reads <= 11 and sum(slept) <= 10


def test_a_read_that_keeps_failing_is_said_once_and_the_watch_still_ends() -> None:
    lines: list[str] = []

    async def read() -> dict[str, Any]:
        raise BackendError("kubernetes", "127.0.0.1:1", "connection refused")

    result = asyncio.run(watch(_armed(0.02), read, lines.append))
    assert not result.reverted and "last read failed" in result.message
    assert len(lines) == 1 and "could not be read" in lines[0]


class _Kube:
    def __init__(self, value: str) -> None:
        self.value = value

    async def get_deployment(self, _namespace: str, _name: str) -> dict[str, Any]:
        return _deployment(self.value)


class _Clients:
    def __init__(self, value: str) -> None:
        self.kube = _Kube(value)

    async def kube_writer(self) -> _Kube:
        return self.kube


class _Remediator:
    """What `watch_and_record` and the app's hand-off use of a Remediator."""

    def __init__(self, armed: RevertWatch | None, value: str) -> None:
        self.revert_watch = armed
        self.clients = _Clients(value)
        self.recorded: list[tuple[str, dict[str, Any]]] = []
        self.closed = False

    async def _record_after(self, run: Any, _say: Any, transition: str, **fields: Any) -> None:
        self.recorded.append((transition, {"action_id": run.action_id, **fields}))

    async def __aexit__(self, *_exc: object) -> None:
        self.closed = True


def test_the_app_gets_its_result_first_and_the_revert_later_then_the_clients_close() -> None:
    from oncall.service.remediation import _WATCHES, REVERT_WATCH, hand_off_revert_watch

    lines: list[str] = []
    remediator = _Remediator(_armed(5), "256")  # the operator already put 256 back

    async def go() -> bool:
        handed = hand_off_revert_watch(remediator, lines.append)  # type: ignore[arg-type]
        assert not remediator.closed and not lines  # returned before the watch ran
        # The running watches are kept; each is bounded by its own time limit (5 s here).
        await asyncio.wait_for(asyncio.gather(*_WATCHES), 10)
        return handed

    assert asyncio.run(go())
    assert remediator.closed  # the watch closed the clients once done
    assert [t for t, _ in remediator.recorded] == ["reverted"]
    assert remediator.recorded[0][1]["action_id"] == "a1"
    assert all(line.startswith(REVERT_WATCH) for line in lines)
    assert any("REVERTED" in line for line in lines)
    assert remediator.revert_watch is None


def test_nothing_is_handed_off_without_an_armed_watch() -> None:
    from oncall.service.remediation import hand_off_revert_watch

    remediator = _Remediator(None, "256")
    assert not hand_off_revert_watch(remediator, lambda _l: None)  # type: ignore[arg-type]
    assert not remediator.closed  # the caller closes it
