"""The app's workers: each awaits the service and only posts messages.

One loop per context refreshes the alert states; one run per checklist streams its events;
the history (the board's sparklines) is fetched on request. None of them touches the
`AlertBook` or a screen: the app's message handlers do that on the event loop, so a worker
waiting on a hung backend never holds up a key press (oncall.tui.app).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from textual.dom import DOMNode
from textual.message import Message
from textual.worker import Worker

from oncall.errors import ConfigError, OncallError
from oncall.model.alerts import RuleStatus
from oncall.service.sources import AlertsSource, ChecklistRunner, NoRunbook
from oncall.tui.messages import AlertsFailed, AlertsRefreshed, ChecklistEnded, ChecklistProgress

#: The app's `post_message`.
Post = Callable[[Message], bool]

T = TypeVar("T")


def ask_in_worker(
    node: DOMNode,
    group: str,
    question: Callable[[], Awaitable[T]],
    answer: Callable[[T | None, str | None], Message],
) -> None:
    """Ask a source in a worker of `node` (a screen; the source reads in a thread) and post
    the answer to it as a message — `answer(result, None)`, or `answer(None, why)` when the
    question raised: shown on the screen, never fatal. A newer question of the same group
    cancels this one."""

    async def work() -> None:
        try:
            result = await question()
        except Exception as exc:  # shown on the screen, never fatal
            node.post_message(answer(None, describe(exc)))
        else:
            node.post_message(answer(result, None))

    # The function, not a coroutine made now: a worker replaced in the same loop step (`r`
    # twice) is cancelled before it runs, and its coroutine would be dropped never awaited.
    # (Typed: from a callable alone mypy infers no result type for Textual's WorkType.)
    _worker: Worker[None] = node.run_worker(
        work, name=group, group=group, exclusive=True, exit_on_error=False
    )


async def alerts_loop(
    post: Post,
    source: AlertsSource,
    *,
    context: str,
    interval: float,
    wake: asyncio.Event,
    clock: Callable[[], float],
) -> None:
    """Refresh `context`'s alert states every `interval` seconds, or sooner when `wake` is set."""
    of = context or None
    while True:
        wake.clear()
        try:
            statuses = await source.refresh()
        except ConfigError as exc:
            post(AlertsFailed(exc.report().removeprefix("oncall: "), of))
        except Exception as exc:  # a broken refresh is shown and tried again, never fatal
            post(AlertsFailed(describe(exc), of))
        else:
            post(AlertsRefreshed(statuses, clock(), of, source.warnings()))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval):
                await wake.wait()


async def histories(sources: Iterable[AlertsSource]) -> dict[str, list[tuple[float, float]]]:
    """Every context's recent values, by alert; a context that fails adds nothing."""

    async def one(source: AlertsSource) -> dict[str, list[tuple[float, float]]]:
        try:
            return await source.history()
        except Exception:  # sparklines are decoration: the states show what is broken
            return {}

    found = await asyncio.gather(*(one(s) for s in sources))
    return {k: v for part in found for k, v in part.items()}


async def checklist_run(
    post: Post,
    checklists: ChecklistRunner,
    alert: str,
    generation: int,
    status: RuleStatus | None,
) -> None:
    """Run `alert`'s checklist, posting each event, and how it ended."""
    end = ChecklistEnded(alert, generation)
    try:
        async for event in checklists.run(alert, status):
            post(ChecklistProgress(alert, generation, event))
    except NoRunbook as exc:
        end = ChecklistEnded(alert, generation, str(exc), "no runbook")
    except ConfigError as exc:
        end = ChecklistEnded(alert, generation, exc.report(), "runbook invalid")
    except Exception as exc:  # shown on the board and the incident screen, never fatal
        end = ChecklistEnded(alert, generation, describe(exc), "error")
    post(end)


def describe(exc: BaseException) -> str:
    """An error as the board shows it: oncall's own by its message, others with their type."""
    if isinstance(exc, OncallError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
