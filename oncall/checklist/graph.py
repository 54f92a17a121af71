"""The `needs` graph of a runbook's steps: finding a cycle (a lint problem) and the order the
engine starts them in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

Item = TypeVar("Item")


def find_cycle(graph: Mapping[str, list[str]]) -> list[str] | None:
    """One cycle in graph (as a path that returns to its start), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def topological(
    items: Sequence[Item],
    *,
    key: Callable[[Item], str],
    needs: Callable[[Item], Sequence[str]],
) -> list[Item]:
    """Items in an order where each comes after its needs, stable otherwise. Items whose needs
    can never be placed (a cycle, a missing id: lint refuses both) come last, as given."""
    placed: set[str] = set()
    ordered: list[Item] = []
    remaining = list(items)
    while remaining:
        ready = [i for i in remaining if all(n in placed for n in needs(i))]
        if not ready:
            return ordered + remaining
        for item in ready:
            placed.add(key(item))
            ordered.append(item)
        remaining = [i for i in remaining if key(i) not in placed]
    return ordered
