"""A cancellation of the caller (Ctrl-C: asyncio.run cancels the main task) stays a
cancellation through one HTTP exchange, even when the library under it swallows it, as
anyio#1214 does when the cancel lands while `connect_tcp` cancels its other Happy Eyeballs
attempts (the request returns, or fails with ConnectError, and the task still counts the
cancellation). The libraries are stood in for by awaitables that do exactly that."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import httpx
import pytest

from oncall.backends.http import exchange
from oncall.errors import BackendError

ANSWER = httpx.Response(200, json={"status": "success"})


async def swallows_then_answers(started: asyncio.Event) -> httpx.Response:
    started.set()
    with contextlib.suppress(asyncio.CancelledError):  # taken for the library's own
        await asyncio.sleep(30)
    return ANSWER


async def swallows_then_fails(started: asyncio.Event) -> httpx.Response:
    started.set()
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        raise httpx.ConnectError("All connection attempts failed") from None
    return ANSWER


async def cancelled_during(
    request: Callable[[asyncio.Event], Awaitable[httpx.Response]],
) -> asyncio.Task[httpx.Response]:
    started = asyncio.Event()
    call = exchange(request(started), backend="prometheus", target="http://127.0.0.1:9", within=5)
    task = asyncio.ensure_future(call)
    await started.wait()
    task.cancel()
    await asyncio.wait([task])
    return task


@pytest.mark.parametrize("request_", [swallows_then_answers, swallows_then_fails])
async def test_a_cancellation_the_library_swallowed_is_raised_again(
    request_: Callable[[asyncio.Event], Awaitable[httpx.Response]],
) -> None:
    task = await cancelled_during(request_)
    assert task.cancelled(), task.exception() if not task.cancelled() else None


async def test_its_own_timeout_is_still_a_timeout_and_an_answer_an_answer() -> None:
    with pytest.raises(BackendError, match="timeout"):
        await exchange(asyncio.sleep(30), backend="prometheus", target="http://x", within=0.05)  # type: ignore[arg-type]

    async def answers() -> httpx.Response:
        return ANSWER

    assert await exchange(answers(), backend="prometheus", target="http://x", within=5) is ANSWER


async def test_a_call_after_a_cancellation_was_caught_is_not_cancelled_by_it() -> None:
    """The executor catches Ctrl-C during a verification to write its audit record, then
    raises it again: the exchanges of that record run while the task still counts it."""

    async def answers() -> httpx.Response:
        return ANSWER

    async def interrupted() -> httpx.Response:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            answer = await exchange(answers(), backend="redis", target="x", within=5)
            assert asyncio.current_task().cancelling() == 1  # type: ignore[union-attr]
            return answer
        raise AssertionError("not cancelled")

    task = asyncio.ensure_future(interrupted())
    await asyncio.sleep(0)
    task.cancel()
    assert await task is ANSWER
