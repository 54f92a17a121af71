"""The collector paused for a headless command's start-up is as the caller had it afterwards."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from oncall import runtime
from oncall.cli.main import main


@pytest.fixture
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable()


@pytest.mark.usefixtures("collector_on")
def test_start_up_is_paused_then_frozen_and_all_restored_at_the_end() -> None:
    with runtime.start_up_paused():
        assert not gc.isenabled()
        kept = [object() for _ in range(3)]
        runtime.start_up_done()
        assert gc.isenabled() and gc.get_freeze_count() > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert kept


@pytest.mark.usefixtures("collector_on")
def test_a_command_failing_in_its_start_up_leaves_the_collector_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`oncall check ../x` stops at its usage error, before the start-up ends."""
    assert main(["check", "../x"]) == 2
    assert "not an alert name" in capsys.readouterr().err
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_caller_with_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with runtime.start_up_paused():
            runtime.start_up_done()
            assert not gc.isenabled()  # not paused by us: not ours to turn on
        assert not gc.isenabled()
    finally:
        gc.enable()
