"""tests/harness/waiting.py: what a wait returns, and what its failure says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.processes import Started
from tests.harness.waiting import eventually, wait_until


def test_a_wait_returns_what_the_condition_returned() -> None:
    answers: list[dict[str, bool] | None] = [None, {}, {"ready": True}]
    got = wait_until(lambda: answers.pop(0), within=5, what="an answer", interval=0)
    assert got == {"ready": True}


def test_a_failed_wait_names_what_it_waited_for_and_what_it_saw() -> None:
    with pytest.raises(AssertionError, match=r"^gave up after 0s waiting for the pods; it last"):
        wait_until(lambda: [], within=0, what="the pods")
    with pytest.raises(AssertionError, match=r"waiting for the pods; saw \{'ready': 1\}$"):
        wait_until(lambda: False, within=0, what="the pods", seen=lambda: {"ready": 1})


def test_a_wait_on_a_process_that_exited_stops_at_once_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("bind: address in use\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait(timeout=30)
    with pytest.raises(AssertionError) as failed:
        wait_until(lambda: False, within=60, what="the port", watching=Started(proc, log))
    assert (
        str(failed.value)
        == "gave up waiting for the port: it exited with 3\nbind: address in use\n"
    )


async def test_eventually_awaits_the_condition() -> None:
    answers = iter([0, 0, 7])

    async def answer() -> int:
        return next(answers)

    assert await eventually(answer, within=5, what="seven", interval=0) == 7
    with pytest.raises(AssertionError, match=r"^gave up after 0s waiting for nothing$"):
        await eventually(answer_none, within=0, what="nothing")


async def answer_none() -> None:
    return None
