"""One rule document checked as Prometheus checks it: its problems and its good alerting rules.

`RuleFileChecker` checks one document (a rule file, or one PrometheusRule object's spec) for
`oncall.alerts.loader`. The checks follow Prometheus' `rulefmt` (model/rulefmt/rulefmt.go),
which `promtool check rules` and the server run: unknown fields at file, group and rule level;
a group needs a name that is unique in its file; a rule has exactly one of `record`/`alert` and
a non-empty `expr`; `for`, `keep_firing_for` and `annotations` belong to alerting rules only;
durations as Prometheus parses them; label and annotation names `[a-zA-Z_][a-zA-Z0-9_]*` (the
"legacy" scheme of Prometheus 2; Prometheus 3 with UTF-8 names accepts more), no `__name__`
label; `record` a valid metric name.
Duplicate alert names in a group are allowed, as in Prometheus (they become separate rules).

Deliberate differences from rulefmt:
- PromQL is parsed by `promql-parser` (the Rust port of Prometheus' own parser, tracking
  Prometheus 3): functions Prometheus 3 removed (`holt_winters`) are refused, its experimental
  ones (`limitk`, `info`) accepted; the error names the expression's position, not the offset in
  it. Its regexes are Rust's: each `=~`/`!~` matcher is compiled again with RE2 (google-re2),
  whose syntax Go's regexp follows, so `x++` or `a{1001}` are refused as Prometheus refuses
  them. Templates are parsed by `oncall.alerts.templates` (undefined variables and functions
  refused, as Go's parser does).
- A number or boolean where a string belongs (`severity: 1`, `expr: 1`) is read as its text,
  as Prometheus does. pyyaml reads YAML 1.1, so the rare `yes`, `on`, `1:30` or `0o10` become
  "true", "true", "5400" and "8" here where Prometheus keeps the text: quote such values.
- An empty file is 0 rules, as for Prometheus; a non-empty one without `groups` is a problem.
  `groups:` with no value still means no groups.
- Every problem is reported with FILE:LINE:COL and key path. rulefmt stops at the first invalid
  duration, checks nothing more after a YAML type error (unknown field, a list for a string),
  and gives no position for label, annotation and template problems.

What loads when a file has problems: an alerting rule is kept unless a problem lies inside it
or in its group's own fields (name, interval, limit, query_offset, labels, a duplicate key);
other problems of the file (an unknown top-level key, a broken sibling rule) do not drop it.
A YAML syntax error loads nothing from that file.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import promql_parser

from oncall.alerts.durations import parse_prom_duration
from oncall.alerts.liveness import regex_error
from oncall.alerts.prometheusrule import RuleDocument
from oncall.alerts.templates import template_error
from oncall.model.alerts import AlertRule
from oncall.promql_windows import scale_windows
from oncall.settings.yaml_marks import KeyPath, MarkedDocument, load_marked_yaml

_FILE_FIELDS = ("groups",)
_GROUP_FIELDS = ("name", "interval", "query_offset", "limit", "labels", "rules")
_RULE_FIELDS = ("record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_TOP_NOT_MAPPING = "the top level must be a mapping of settings"  # yaml_marks' wording


def _dotted(path: KeyPath) -> str:
    return ".".join(str(part) for part in path)


def _kind(value: object) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dt.date):
        return "a date"
    return type(value).__name__


def _unclosed_template(text: str) -> int | None:
    """Offset of the first `{{` without a later `}}`, else None (a minimal template check)."""
    pos = 0
    while (start := text.find("{{", pos)) != -1:
        end = text.find("}}", start + 2)
        if end == -1:
            return start
        pos = end + 2
    return None


@dataclass
class _Group:
    name: str
    interval_s: float | None
    labels: dict[str, str]


class RuleFileChecker:
    """Checks one rule file; collects its problems and its good alerting rules."""

    def __init__(self, path: Path, for_scale: float, document: RuleDocument | None = None) -> None:
        self.file = str(path)
        self.for_scale = for_scale
        self.doc: MarkedDocument
        self.document = document
        if document is None:
            self.doc, self.problems = load_marked_yaml(path, self.file)
        else:  # a PrometheusRule object's spec, already read
            self.doc, self.problems = document.doc, list(document.problems)
        self.rules: list[AlertRule] = []
        self.recording = 0
        # Duplicate keys found while reading taint the group or rule that holds them.
        self.tainted: set[KeyPath] = set()
        for problem in self.problems:
            parts = problem.key.split(".")
            if len(parts) >= 2 and parts[0] == "groups" and parts[1].isdigit():
                self.tainted.add(("groups", int(parts[1])))
                if len(parts) >= 4 and parts[2] == "rules" and parts[3].isdigit():
                    self.tainted.add(("groups", int(parts[1]), "rules", int(parts[3])))

    def add(self, path: KeyPath, message: str, *, of_key: bool = False) -> None:
        self.problems.append(self.doc.problem(path, message, key=_dotted(path), of_key=of_key))

    def check(self) -> None:
        self._check()
        if self.document is not None:
            self.problems = self.document.located(self.problems)

    def _check(self) -> None:
        if self.problems and not self.doc.value_at:
            # Unreadable, a syntax error, or a top level that is not a mapping: nothing to walk.
            self.problems = [
                replace(p, message="a rule file must be a mapping with a 'groups' list")
                if p.message == _TOP_NOT_MAPPING
                else p
                for p in self.problems
            ]
            return
        data = self.doc.data
        self._unknown_fields((), data, _FILE_FIELDS, "a rule file has only")
        if "groups" not in data:
            if data:  # an empty file is 0 rules, as for Prometheus
                self.add(("groups",), "missing field 'groups'")
            return
        groups = data["groups"]
        if groups is None:
            return
        if not isinstance(groups, list):
            self.add(("groups",), f"must be a list of groups, not {_kind(groups)}")
            return
        names: dict[str, int] = {}
        for index, raw in enumerate(groups):
            self._group(index, raw, names)

    def _unknown_fields(
        self, path: KeyPath, raw: dict[Any, Any], allowed: tuple[str, ...], what: str
    ) -> None:
        for key in raw:
            name = str(key)
            if name in allowed:
                continue
            close = difflib.get_close_matches(name, allowed, n=1)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            message = f'unknown field "{name}" ({hint}{what} {", ".join(allowed)})'
            self.add((*path, name), message, of_key=True)

    def _string(self, path: KeyPath, value: object, what: str) -> str | None:
        if isinstance(value, str):
            return value
        # Prometheus reads an unquoted scalar's text as the string (`priority: 1` is "1").
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        self.add(path, f"{what} must be a string, not {_kind(value)}")
        return None

    def _duration(self, path: KeyPath, value: object) -> float | None:
        """Seconds, or None when absent (null) or invalid (then a problem is added)."""
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value == 0:
            return 0.0
        if not isinstance(value, str):
            self.add(path, f"a duration must be a string like 1m30s, not {_kind(value)}")
            return None
        try:
            return parse_prom_duration(value)
        except ValueError as exc:
            self.add(path, str(exc))
            return None

    def _labels(self, path: KeyPath, value: object, what: str, *, template: bool) -> dict[str, str]:
        """Labels or annotations; `what` is "label" or "annotation"."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.add(path, f"must be a mapping of {what} names to values, not {_kind(value)}")
            return {}
        result: dict[str, str] = {}
        for key, raw in value.items():
            name = str(key)
            item = (*path, name)
            if not _LABEL_NAME.fullmatch(name):
                rule = "letters, digits and _, not starting with a digit"
                self.add(item, f'invalid {what} name "{name}": use {rule}', of_key=True)
            elif what == "label" and name == "__name__":
                self.add(item, 'a rule cannot set the "__name__" label', of_key=True)
            text = self._string(item, raw, f"a {what} value")
            if text is None:
                continue
            if template and (offset := _unclosed_template(text)) is not None:
                self.add(
                    item, f'"{{{{" at offset {offset} of the template is never closed by "}}}}"'
                )
            elif template and (error := template_error(text)) is not None:
                self.add(item, error)
            result[name] = text
        return result

    def _group(self, index: int, raw: object, names: dict[str, int]) -> None:
        path: KeyPath = ("groups", index)
        if not isinstance(raw, dict):
            self.add(path, f"a group must be a mapping with name and rules, not {_kind(raw)}")
            return
        before = len(self.problems)
        self._unknown_fields(path, raw, _GROUP_FIELDS, "a group has only")
        name = ""
        if "name" not in raw:
            self.add((*path, "name"), "a group needs a name")
        elif (text := self._string((*path, "name"), raw["name"], "name")) is not None:
            name = text
            if not name:
                self.add((*path, "name"), "a group needs a name")
            elif name in names:
                self.add(
                    (*path, "name"), f'group "{name}" is already defined on line {names[name]}'
                )
            else:
                names[name] = self.doc.value_at[(*path, "name")].line
        interval = self._duration((*path, "interval"), raw.get("interval"))
        self._duration((*path, "query_offset"), raw.get("query_offset"))
        limit = raw.get("limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            self.add((*path, "limit"), f"limit must be a whole number, not {_kind(limit)}")
        labels = self._labels((*path, "labels"), raw.get("labels"), "label", template=False)
        group = _Group(name, interval, labels)
        broken = len(self.problems) > before or path in self.tainted
        rules = raw.get("rules")
        if rules is None:
            return
        if not isinstance(rules, list):
            self.add((*path, "rules"), f"must be a list of rules, not {_kind(rules)}")
            return
        for rule_index, rule in enumerate(rules):
            self._rule((*path, "rules", rule_index), rule, group, broken)

    def _rule(self, path: KeyPath, raw: object, group: _Group, group_broken: bool) -> None:
        if not isinstance(raw, dict):
            self.add(
                path, f"a rule must be a mapping with alert or record and expr, not {_kind(raw)}"
            )
            return
        before = len(self.problems)
        self._unknown_fields(path, raw, _RULE_FIELDS, "a rule has only")
        is_alert, is_record = "alert" in raw, "record" in raw
        if is_alert and is_record:
            self.add(path, "a rule has either 'alert' or 'record', not both")
        elif not (is_alert or is_record):
            self.add(path, "a rule needs 'alert' (alerting rule) or 'record' (recording rule)")
        expr = self._expr(path, raw)
        if is_record and not is_alert:
            self._recording(path, raw)
            self.recording += 1
            return
        name = None
        if is_alert:
            name = self._string((*path, "alert"), raw["alert"], "alert")
            if name == "":
                self.add((*path, "alert"), "the alert name is empty")
        for_s = self._duration((*path, "for"), raw.get("for"))
        keep_s = self._duration((*path, "keep_firing_for"), raw.get("keep_firing_for"))
        labels = self._labels((*path, "labels"), raw.get("labels"), "label", template=True)
        annotations = self._labels(
            (*path, "annotations"), raw.get("annotations"), "annotation", template=True
        )
        broken = group_broken or len(self.problems) > before or path in self.tainted
        if broken or is_record or not name or expr is None:
            return
        self.rules.append(
            AlertRule(
                name=name,
                # The drill's deployed copy scales the windows with `for` (drill/rules.py).
                expr=scale_windows(expr, self.for_scale),
                group=group.name,
                file=self.file,
                line=self.doc.key_at[(*path, "alert")].line,
                col=self.doc.key_at[(*path, "alert")].col,
                for_s=(for_s or 0.0) * self.for_scale,
                keep_firing_for_s=(keep_s or 0.0) * self.for_scale,
                labels={**group.labels, **labels},  # rule labels override group labels
                annotations=annotations,
                group_interval_s=group.interval_s,
            )
        )

    def _expr(self, path: KeyPath, raw: dict[Any, Any]) -> str | None:
        if "expr" not in raw:
            self.add((*path, "expr"), "missing field 'expr' (the PromQL expression)")
            return None
        expr = self._string((*path, "expr"), raw["expr"], "expr")
        if expr is not None and not expr.strip():
            self.add((*path, "expr"), "expr is empty")
            return None
        if expr is not None:
            try:
                promql_parser.parse(expr)
            except ValueError as exc:  # the parser's only error type
                self.add((*path, "expr"), f"could not parse expression: {exc}")
                return None
            if (error := regex_error(expr)) is not None:
                self.add((*path, "expr"), f"could not parse expression: {error}")
                return None
        return expr

    def _recording(self, path: KeyPath, raw: dict[Any, Any]) -> None:
        name = self._string((*path, "record"), raw["record"], "record")
        if name is not None and not _METRIC_NAME.fullmatch(name):
            hint = (
                " (a selector belongs in expr)"
                if "{" in name or "}" in name
                else ": use letters, digits, _ and :, not starting with a digit"
            )
            self.add((*path, "record"), f'invalid metric name "{name}"{hint}')
        for key in ("for", "keep_firing_for"):
            if self._duration((*path, key), raw.get(key)):
                message = f"'{key}' is only for alerting rules, not in a recording rule"
                self.add((*path, key), message, of_key=True)
        self._labels((*path, "labels"), raw.get("labels"), "label", template=False)
        annotations = raw.get("annotations")
        if annotations:
            message = "'annotations' is only for alerting rules, not in a recording rule"
            self.add((*path, "annotations"), message, of_key=True)
