"""Read a YAML file into plain data plus the line:col of every key and value.

pyyaml's composed nodes carry marks; we keep them so that every settings problem carries its
file, line and column. Duplicate keys, which pyyaml would silently collapse, are reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from oncall.errors import Problem

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    col: int  # 1-based


@dataclass
class MarkedDocument:
    """A YAML mapping with the positions of its keys and values, by key path."""

    file: str
    data: dict[str, Any] = field(default_factory=dict)
    key_at: dict[KeyPath, Position] = field(default_factory=dict)
    value_at: dict[KeyPath, Position] = field(default_factory=dict)

    def position(self, path: KeyPath, *, of_key: bool = False) -> Position:
        """LINE:COL of the longest known prefix of path (the key or its value); 1:1 if none."""
        table = self.key_at if of_key else self.value_at
        for end in range(len(path), 0, -1):
            pos = table.get(path[:end]) or self.key_at.get(path[:end])
            if pos is not None:
                return pos
        return Position(1, 1)

    def problem(
        self, path: KeyPath, message: str, *, key: str | None = None, of_key: bool = False
    ) -> Problem:
        """A problem at path (see `position`); `key` defaults to path dotted."""
        pos = self.position(path, of_key=of_key)
        dotted = ".".join(map(str, path)) if key is None else key
        return Problem(self.file, pos.line, pos.col, dotted, message)

    def at(self, pos: Position, key: str, message: str) -> Problem:
        """A problem at a known position of this file."""
        return Problem(self.file, pos.line, pos.col, key, message)


def _pos(node: yaml.Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


def _walk(
    doc: MarkedDocument,
    node: yaml.Node,
    path: KeyPath,
    problems: list[Problem],
    inside: frozenset[int] = frozenset(),
) -> None:
    if id(node) in inside:  # an alias to an enclosing node (`a: &x {b: *x}`): no positions
        return
    inside = inside | {id(node)}
    doc.value_at[path] = _pos(node)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                problems.append(doc.problem(path, "keys must be plain strings"))
                continue
            key = key_node.value
            if key == "<<" and key_node.tag == "tag:yaml.org,2002:merge":
                # A merge key (`<<: *defaults`): the mapping's own keys override the merged
                # ones, as YAML says, so neither is a duplicate; merged keys keep no position.
                continue
            child = (*path, key)
            if key in seen:
                problems.append(doc.at(_pos(key_node), ".".join(map(str, child)), "duplicate key"))
            seen.add(key)
            doc.key_at[child] = _pos(key_node)
            _walk(doc, value_node, child, problems, inside)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(doc, item, (*path, index), problems, inside)


def load_marked_yaml(
    path: Path, display: str | None = None
) -> tuple[MarkedDocument, list[Problem]]:
    """Parse path; a syntax error becomes one Problem at its position, never an exception.

    An empty file is an empty mapping; a top level that is not a mapping is a problem.
    """
    name = display or str(path)
    doc = MarkedDocument(file=name)
    problems: list[Problem] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return doc, [Problem(name, None, None, "", "file not found")]
    except (OSError, UnicodeDecodeError) as exc:
        return doc, [Problem(name, None, None, "", f"cannot read: {exc}")]
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            # Positions are read before constructing: construction flattens merge keys
            # (`<<: *anchor`) into the node, which would look like duplicate keys.
            if node is not None and isinstance(node, yaml.MappingNode):
                _walk(doc, node, (), problems)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = f"YAML syntax error: {exc.problem or exc.context}"
        if mark is None:
            return doc, [Problem(name, None, None, "", message)]
        return doc, [Problem(name, mark.line + 1, mark.column + 1, "", message)]
    except yaml.YAMLError as exc:
        return doc, [Problem(name, None, None, "", f"YAML error: {exc}")]
    if node is None:
        return doc, []
    if not isinstance(data, dict):
        return doc, [doc.at(_pos(node), "", "the top level must be a mapping of settings")]
    doc.data = data
    return doc, problems
