"""The needs graph: cycles found as paths, and the start order of steps."""

from __future__ import annotations

from oncall.checklist.graph import find_cycle, topological

NEEDS = {"a": [], "b": ["a"], "c": ["a", "b"], "d": []}


def order(graph: dict[str, list[str]], items: list[str]) -> list[str]:
    return topological(items, key=lambda i: i, needs=lambda i: graph.get(i, []))


def test_each_item_comes_after_its_needs_and_the_given_order_holds_otherwise() -> None:
    assert order(NEEDS, ["c", "d", "b", "a"]) == ["d", "a", "b", "c"]
    assert order(NEEDS, ["a", "b", "c", "d"]) == ["a", "d", "b", "c"]


def test_items_that_can_never_be_placed_come_last_instead_of_looping() -> None:
    cyclic = {"a": [], "x": ["y"], "y": ["x"], "z": ["missing"]}
    assert order(cyclic, ["x", "a", "y", "z"]) == ["a", "x", "y", "z"]


def test_find_cycle() -> None:
    assert find_cycle(NEEDS) is None
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
