"""Read a YAML file into plain data plus the line:col of every key and value, bounded.

pyyaml's composed nodes carry marks; we keep them so that every settings problem carries its
file, line and column. Duplicate keys, which pyyaml would silently collapse, are reported.

Every settings file, runbook and rule file is read here, so the bounds live here too
(`YamlLimits`, from the `limits` settings): a file larger than `max_file_bytes` is refused
before it is parsed; while composing, nesting deeper than `max_depth` and a document that
aliases would expand past `max_nodes` (the "billion laughs") stop at the offending mark,
before anything is constructed. Whatever else goes wrong (a control character, a bad tag,
`!!int` of 5,000 digits) is one Problem at FILE:LINE:COL, never an exception.

Files are scanned by libyaml (pyyaml's CParser) under the same Python composer: pyyaml's
pure-Python scanner was most of the YAML time of every start. A file with any problem is read
again by the pure-Python reader, whose wording the problems have always had.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.reader import Reader
from yaml.resolver import Resolver

try:
    from yaml._yaml import CParser

    HAVE_LIBYAML = True
except ImportError:  # a pyyaml built without libyaml: the pure-Python reader only
    CParser = object  # type: ignore[assignment,misc]
    HAVE_LIBYAML = False

from oncall.errors import Problem
from oncall.settings.files import not_regular

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


@dataclass(frozen=True)
class YamlLimits:
    """The bounds of every YAML file we read (the `limits` settings carry the same defaults)."""

    # 8 MiB: teams keep rule files of a few MiB (a real one is 1.2 MB); runbooks are KiB.
    max_file_bytes: int = 8 * 1_048_576
    max_depth: int = 64  # mappings and lists inside each other; ours need < 10
    max_nodes: int = 1_000_000  # nodes after alias expansion; 8 MiB of rules have fewer


if TYPE_CHECKING:  # what `_Bounds` is mixed into: a loader (its Composer, its Constructor)
    _LoaderBase = yaml.SafeLoader
else:
    _LoaderBase = object

_limits = [YamlLimits()]  # a one-item box: set_limits replaces its content


def set_limits(limits: YamlLimits) -> None:
    """Bounds for every later read. The settings loader calls it with the effective `limits`
    settings: runbooks and rule files are read far from the settings (service, tui, lint),
    and threading the bounds through every call would not make them any less process-wide."""
    _limits[0] = limits


def current_limits() -> YamlLimits:
    return _limits[0]


class _Bounds(_LoaderBase):
    """Counts depth and alias expansion while composing, and locates errors raised while
    constructing a value (`!!int 99…9`, `!!float x`), at that value's node; mixed into a
    loader before its Composer and Constructor."""

    def _set_bounds(self, limits: YamlLimits) -> None:
        self._bounds = limits
        self._depth = 0
        self._nodes = 0
        self._weight: dict[int, int] = {}  # id(node) → nodes it expands to, once composed

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = event.start_mark
        self._depth += 1
        if self._depth > self._bounds.max_depth:
            raise ComposerError(
                None, None, f"nested deeper than {self._bounds.max_depth} levels", mark,
            )  # fmt: skip
        node = super().compose_node(parent, index)
        if node is None:  # pyyaml calls it only where a node follows; typed as optional
            return None
        self._depth -= 1
        if isinstance(event, AliasEvent):
            weight = self._weight.get(id(node))
            if weight is None:  # an alias to a node still being composed: a cycle
                raise ComposerError(None, None, "an alias refers to an enclosing node", mark)
        else:
            weight = 1 + self._children_weight(node)
            self._weight[id(node)] = weight
            weight = 1  # the children counted themselves as they were composed
        self._nodes += weight
        if self._nodes > self._bounds.max_nodes:
            raise ComposerError(
                None, None,
                f"aliases expand this document past {self._bounds.max_nodes:,} nodes", mark,
            )  # fmt: skip
        return node

    def _children_weight(self, node: yaml.Node) -> int:
        if isinstance(node, yaml.MappingNode):
            pairs = node.value
            return sum(self._weight.get(id(k), 1) + self._weight.get(id(v), 1) for k, v in pairs)
        if isinstance(node, yaml.SequenceNode):
            return sum(self._weight.get(id(item), 1) for item in node.value)
        return 0

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, ArithmeticError, LookupError, AttributeError) as exc:
            # e.g. ints past the 4,300-digit limit, `!!float x`, an empty `!!int` (IndexError).
            text = str(exc)
            if "integer string conversion" in text:
                text = "an integer of more digits than Python reads (4,300)"
            raise ConstructorError(
                None, None, f"cannot read this value: {text}", node.start_mark
            ) from exc


class _BoundedLoader(_Bounds, yaml.SafeLoader):
    """pyyaml's SafeLoader, bounded: its pure-Python scanner gives every error's wording."""

    def __init__(self, text: str, limits: YamlLimits) -> None:
        super().__init__(text)
        self._set_bounds(limits)


class _FastLoader(_Bounds, Composer, SafeConstructor, Resolver, CParser):
    """The same bounded composer and constructor over libyaml's scanner and parser (CParser):
    the events, and so the nodes, marks and data, of a well-formed file are the same, and
    reading one is about fifteen times faster (most of a headless command's YAML time: the
    settings, the rule packs and a runbook). Any error is left to `_BoundedLoader`."""

    def __init__(self, text: str, limits: YamlLimits) -> None:
        CParser.__init__(self, text)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        Composer.__init__(self)
        self._set_bounds(limits)


def _parse(loader: Any, doc: MarkedDocument, problems: list[Problem]) -> tuple[Any, Any]:
    """(root node, data) of the loader's one document; positions and duplicates into doc."""
    try:
        node = loader.get_single_node()
        # Positions are read before constructing: construction flattens merge keys
        # (`<<: *anchor`) into the node, which would look like duplicate keys.
        if node is not None and isinstance(node, yaml.MappingNode):
            _walk(doc, node, (), problems)
        data = loader.construct_document(node) if node is not None else None
    except (ValueError, OverflowError) as exc:
        raise _located(loader, exc) from exc
    finally:
        loader.dispose()
    return node, data


def _located(loader: Any, exc: ValueError | OverflowError) -> yaml.MarkedYAMLError:
    """pyyaml's pure-Python scanner calls chr() on a "\\U" escape past U+10FFFF and lets its
    ValueError (OverflowError past 2**31) out: a syntax error at the scanner's position."""
    why = f"cannot read this value: {exc}"
    return yaml.scanner.ScannerError(None, None, why, loader.get_mark())


def _parse_fast(
    text: str, limits: YamlLimits, doc: MarkedDocument, problems: list[Problem]
) -> tuple[Any, Any] | None:
    """`_parse` through libyaml; None (doc and problems as they were) for a text the
    pure-Python reader must see: one with a character it refuses, or any error, so that every
    problem reads exactly as it always has (libyaml words its errors its own way)."""
    if not HAVE_LIBYAML or Reader.NON_PRINTABLE.search(text):
        return None
    try:
        return _parse(_FastLoader(text, limits), doc, problems)
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError):
        doc.key_at.clear()
        doc.value_at.clear()
        problems.clear()
        return None


def _documents(loader: Any) -> list[tuple[yaml.Node, Any]]:
    found: list[tuple[yaml.Node, Any]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                found.append((node, loader.construct_document(node)))
    except (ValueError, OverflowError) as exc:
        raise _located(loader, exc) from exc
    finally:
        loader.dispose()
    return found


def compose_documents(text: str, limits: YamlLimits) -> list[tuple[yaml.Node, Any]]:
    """(root node, data) of every document of a multi-document text, under the bounds; raises
    yaml.YAMLError, ValueError or RecursionError as pyyaml's own reader does (libyaml first,
    as in `_parse_fast`, then that reader for a text libyaml does not read)."""
    if HAVE_LIBYAML and not Reader.NON_PRINTABLE.search(text):
        try:
            return _documents(_FastLoader(text, limits))
        except (yaml.YAMLError, ValueError, OverflowError, RecursionError):
            pass
    return _documents(_BoundedLoader(text, limits))


def _reader_problem(name: str, text: str, exc: yaml.reader.ReaderError) -> Problem:
    """A control or unprintable character, at its line and column (ReaderError gives only
    an offset into the text)."""
    before = text[: exc.position]
    line = before.count("\n") + 1
    col = exc.position - (before.rfind("\n") + 1) + 1
    char = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
    message = f"YAML syntax error: character U+{char:04X} is not allowed in YAML"
    return Problem(name, line, col, "", message)


def _read_bounded(path: Path, name: str, limit: int) -> tuple[str | None, list[Problem]]:
    """The file's text, or the problem that stops us: missing, unreadable, too big."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would wait for a writer forever; it is then
        # refused as what it is. A regular file ignores the flag.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, [Problem(name, None, None, "", "file not found")]
    except OSError as exc:
        return None, [Problem(name, None, None, "", f"cannot read: {exc.strerror or exc}")]
    with os.fdopen(fd, "rb") as handle:
        kind = not_regular(os.fstat(fd).st_mode)
        if kind is not None:
            return None, [Problem(name, None, None, "", f"cannot read: {kind}, not a file")]
        try:
            raw = handle.read(limit + 1)  # never more than the limit into memory
        except OSError as exc:
            return None, [Problem(name, None, None, "", f"cannot read: {exc.strerror or exc}")]
    if len(raw) > limit:
        message = (
            f"file larger than {limit:,} bytes (limits.max_file_bytes); refused before parsing"
        )
        return None, [Problem(name, 1, 1, "", message)]
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = len(before) - (before.rfind(b"\n") + 1) + 1
        return None, [Problem(name, line, col, "", "cannot read: not UTF-8 text")]


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
    path: Path, display: str | None = None, *, limits: YamlLimits | None = None
) -> tuple[MarkedDocument, list[Problem]]:
    """Parse path; a syntax error becomes one Problem at its position, never an exception.

    An empty file is an empty mapping; a top level that is not a mapping is a problem.
    """
    name = display or str(path)
    doc = MarkedDocument(file=name)
    problems: list[Problem] = []
    limits = limits or current_limits()
    text, read_problems = _read_bounded(path, name, limits.max_file_bytes)
    if text is None:
        return doc, read_problems
    try:
        parsed = _parse_fast(text, limits, doc, problems)
        node, data = parsed or _parse(_BoundedLoader(text, limits), doc, problems)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = f"YAML syntax error: {exc.problem or exc.context}"
        if mark is None:
            return doc, [Problem(name, None, None, "", message)]
        return doc, [Problem(name, mark.line + 1, mark.column + 1, "", message)]
    except yaml.reader.ReaderError as exc:
        return doc, [_reader_problem(name, text, exc)]
    except yaml.YAMLError as exc:
        return doc, [Problem(name, 1, 1, "", f"YAML error: {exc}")]
    except RecursionError:  # bounded by max_depth; kept as a last guard for odd limits
        return doc, [Problem(name, 1, 1, "", "YAML error: nested too deeply")]
    if node is None:
        return doc, []
    if not isinstance(data, dict):
        return doc, [doc.at(_pos(node), "", "the top level must be a mapping of settings")]
    doc.data = data
    return doc, problems
