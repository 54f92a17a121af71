"""Runbooks matched to alerts by label matchers (`match:`), and overlaps between them.

A runbook with `match: '{alertname="KubePodCrashLooping", namespace=~"ai|inference"}'` is the
runbook of every alert whose labels (with `alertname`) the matchers match. When several match,
the most specific wins: more matchers first, then more equality matchers (`=` says more than
`=~`), then the file name. Two runbooks whose matchers are equally specific and do not exclude
each other (no label that one sets with `=` to a value the other's `=` differs from) may both
match one alert: `oncall runbook lint` reports them, as the choice would then be the file name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from oncall.errors import Problem
from oncall.model.matchers import MatcherError, Selection, parse_selection
from oncall.settings.yaml_marks import MarkedDocument, load_marked_yaml


@dataclass(frozen=True)
class Matched:
    path: Path
    selection: Selection
    line: int | None = None
    col: int | None = None

    @property
    def specificity(self) -> tuple[int, int]:
        matchers = self.selection.matchers
        return (len(matchers), sum(1 for m in matchers if m.op == "="))


Reader = Callable[[Path], tuple[MarkedDocument, list[Problem]]]


def matching_runbooks(files: Sequence[Path], read: Reader = load_marked_yaml) -> list[Matched]:
    """The runbooks among `files` that declare a readable `match:`; `read` reads a file (a
    caller that has read them already passes its cache)."""
    found = []
    for file in files:
        doc, problems = read(file)
        text = doc.data.get("match") if not problems else None
        if not isinstance(text, str):
            continue
        try:
            selection = parse_selection(text, words=False)
        except MatcherError:
            continue  # the lint reports it
        if selection.matchers:
            pos = doc.value_at.get(("match",))
            found.append(Matched(file, selection, pos.line if pos else None,
                                 pos.col if pos else None))  # fmt: skip
    return found


def best_match(candidates: Sequence[Matched], labels: Mapping[str, str]) -> Path | None:
    """The most specific runbook whose matchers match `labels` (alertname included)."""
    hits = [c for c in candidates if c.selection.matches(labels)]
    if not hits:
        return None
    hits.sort(key=lambda c: (-c.specificity[0], -c.specificity[1], c.path.name))
    return hits[0].path


def _exclusive(a: Selection, b: Selection) -> bool:
    """Whether no label set can match both: one label fixed by `=` to two values."""
    fixed = {m.name: m.value for m in a.matchers if m.op == "="}
    for m in b.matchers:
        if m.name in fixed:
            if m.op == "=" and m.value != fixed[m.name]:
                return True
            if m.op == "!=" and m.value == fixed[m.name]:
                return True
            if m.op == "=~" and m.pattern is not None and not m.pattern.fullmatch(fixed[m.name]):
                return True
    return False


def overlaps(candidates: Sequence[Matched]) -> list[Problem]:
    """A problem for each pair of equally specific runbooks that may match the same alert."""
    problems = []
    for index, a in enumerate(candidates):
        for b in candidates[index + 1 :]:
            if a.specificity != b.specificity:
                continue
            if _exclusive(a.selection, b.selection) or _exclusive(b.selection, a.selection):
                continue
            message = (
                f"match overlaps {b.path} (equally specific: an alert matching both gets "
                f"the first by file name); add a matcher to one of them"
            )
            problems.append(Problem(str(a.path), a.line, a.col, "match", message))
    return problems
