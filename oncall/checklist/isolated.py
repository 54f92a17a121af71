"""A costly CEL expression evaluated in a process of its own, killed at the step's deadline.

The CEL binding evaluates in Rust holding the GIL, so an expression that runs long stops the
event loop (and every thread): the app would not repaint or quit on `q`, no step timeout
would fire, and `oncall serve` would stall every checklist of the team. `evaluate_within`
evaluates an expression whose cost bound (`oncall.checklist.cost`) is within `INLINE_COST` in
this process, as before; any other in a child process (`python -I -m
oncall.checklist.isolated`: isolated mode, so neither the working folder nor PYTHON*
variables choose what it imports), handed the expression and the facts it references as JSON
on stdin, which the event loop awaits and which is killed when the step's time is up or the
run is cancelled (the app quitting, a re-run). The child bounds itself too: its address space
(`CHILD_MEMORY_BYTES`: nested `map`s build lists of lists) and its CPU seconds (the deadline,
should its parent die first).

What comes back is the expression's value, or `ExpressionError` with CEL's reason, or
`ExpressionBudgetError` ("no result within 4.2s …", "ran out of memory …"), which makes the
step `unknown`: the runbook asked for more than a step may spend, its facts are not wrong.
"""

from __future__ import annotations

import asyncio
import json
import math
import resource
import signal
import sys
from collections.abc import Mapping

from oncall.checklist.cost import INLINE_COST
from oncall.checklist.expressions import (
    CompiledExpression,
    ExpressionBudgetError,
    ExpressionError,
    compile_expression,
)

#: The child's address space: Python and the binding take ~60 MiB; the rest is for CEL's lists.
CHILD_MEMORY_BYTES = 1 << 30
#: The longest answer read back (an evidence value may be a list; `expect` is a bool).
MAX_ANSWER_BYTES = 4 << 20
#: The child's exit status when Python itself ran out of memory.
_OUT_OF_MEMORY = 3


async def evaluate_within(
    expression: CompiledExpression, facts: Mapping[str, object], seconds: float
) -> object:
    """The value of `expression` over `facts`, within `seconds` when it is costly."""
    cost = expression.cost(facts)
    if cost <= INLINE_COST:
        return expression.evaluate(facts)
    if seconds <= 0:
        raise ExpressionBudgetError(
            f"not evaluated: {expression.shape.nesting()}, about {cost:.1e} steps, "
            "and the step's time is up"
        )
    return await _in_child(expression, expression.used(facts), seconds, cost)


async def _in_child(
    expression: CompiledExpression, used: Mapping[str, object], seconds: float, cost: float
) -> object:
    request = {"text": expression.text, "facts": used, "cpu_s": math.ceil(seconds) + 1}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-m",
        __name__,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(seconds):
            out, _ = await child.communicate(json.dumps(request).encode())
    except TimeoutError:
        raise ExpressionBudgetError(
            f"no result within {seconds:.3g}s: {expression.shape.nesting()}, about "
            f"{cost:.1e} steps over these facts; evaluated apart and stopped at the "
            "step's timeout"
        ) from None
    finally:
        if child.returncode is None:  # timed out, or the run was cancelled (`q`, a re-run)
            child.kill()
            await child.wait()
    if child.returncode != 0 or len(out) > MAX_ANSWER_BYTES:
        raise ExpressionBudgetError(_died(child.returncode, len(out)))
    try:
        answer = json.loads(out)
    except ValueError:
        raise ExpressionBudgetError("the evaluation gave no readable answer") from None
    if "error" in answer:
        raise ExpressionError(str(answer["error"]))
    return answer.get("value")


def _died(code: int | None, size: int) -> str:
    if size > MAX_ANSWER_BYTES:
        return f"the value is larger than {MAX_ANSWER_BYTES >> 20} MiB"
    if code in (-signal.SIGKILL, -signal.SIGXCPU):
        return "the evaluation ran out of CPU time"
    if code in (_OUT_OF_MEMORY, -signal.SIGABRT, -signal.SIGSEGV):  # Rust aborts on OOM
        return f"the evaluation ran out of memory (it may use {CHILD_MEMORY_BYTES >> 20} MiB)"
    return f"the evaluation failed (exit {code})"


def _child() -> int:
    raw = sys.stdin.buffer.read()
    request = json.loads(raw)
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    cpu = int(request["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    facts = request["facts"]
    try:
        expression = compile_expression(request["text"], names=list(facts))
        answer: dict[str, object] = {"value": expression.evaluate(facts, budget=math.inf)}
    except ExpressionError as exc:
        answer = {"error": exc.message}
    except MemoryError:
        return _OUT_OF_MEMORY
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(_child())
