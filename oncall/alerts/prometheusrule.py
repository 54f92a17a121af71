"""Unwrap prometheus-operator `PrometheusRule` objects into plain rule-file documents.

A `PrometheusRule` (`apiVersion: monitoring.coreos.com/v1`, `kind: PrometheusRule`) carries a
rule file's `groups` under `spec.groups`; teams keep them as one object per file, several
objects in a multi-document YAML (`---`), or a `kind: List` of them (`kubectl get -o yaml`).
Each object is checked as its own rule file, as the operator renders one rule file per object
(group names are unique per object, not per YAML file). Positions stay those of the file the
user wrote: every problem keeps its FILE:LINE:COL, and its key path gets the object's prefix
back (`items.1.spec.groups.0.rules.2.expr`, or `spec.…` for a single object).

Schema: https://github.com/prometheus-operator/prometheus-operator (Documentation/api-reference,
`PrometheusRuleSpec.groups` is a `[]RuleGroup` in the rule-file format).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from oncall.errors import Problem
from oncall.settings.yaml_marks import (
    KeyPath,
    MarkedDocument,
    Position,
    _read_bounded,
    _walk,
    compose_documents,
    current_limits,
)

API_VERSION = "monitoring.coreos.com/v1"
KIND = "PrometheusRule"


@dataclass
class RuleDocument:
    """One rule file's worth of YAML: the mapping with `groups`, its positions, its problems
    so far, and the key path it sits at in the file (empty for a plain rule file)."""

    doc: MarkedDocument
    problems: list[Problem]
    prefix: KeyPath

    def located(self, problems: list[Problem]) -> list[Problem]:
        """Problems of the checked document with the object's key prefix put back."""
        if not self.prefix:
            return problems
        head = ".".join(map(str, self.prefix))
        return [replace(p, key=f"{head}.{p.key}" if p.key else head) for p in problems]


def is_kubernetes_object(data: object) -> bool:
    return isinstance(data, dict) and "kind" in data and "apiVersion" in data


def unwrap_prometheus_rules(path: Path, display: str) -> list[RuleDocument] | None:
    """The rule documents of a file of PrometheusRule objects (single, multi-document or a
    `List`); None when the file is a single plain rule file (the caller reads it as before)
    or cannot be parsed (the caller's reading reports the syntax error)."""
    # Read and parsed under the same bounds as every YAML file (size, depth, aliases): a file
    # past them is left to the caller's reading, which reports the bound it hit.
    text, problems = _read_bounded(path, display, current_limits().max_file_bytes)
    if text is None or problems:
        return None
    return unwrap_text(text, display)


def unwrap_text(text: str, display: str) -> list[RuleDocument] | None:
    """`unwrap_prometheus_rules` of YAML text named `display` (an object read from the
    cluster, written out as `kubectl get -o yaml` shows it)."""
    try:
        documents = compose_documents(text, current_limits())
    except (yaml.YAMLError, ValueError, RecursionError):
        return None  # the caller's reading reports it, located
    nodes = [node for node, _data in documents]
    datas = [data for _node, data in documents]
    if len(nodes) <= 1 and not (datas and is_kubernetes_object(datas[0])):
        return None
    result: list[RuleDocument] = []
    for index, (node, data) in enumerate(zip(nodes, datas, strict=True)):
        whole = MarkedDocument(file=display)
        walked: list[Problem] = []
        if isinstance(node, yaml.MappingNode):
            _walk(whole, node, (), walked)
        if not isinstance(data, dict):
            pos = Position(node.start_mark.line + 1, node.start_mark.column + 1)
            message = f"document {index + 1} is not a mapping (a PrometheusRule or rule file)"
            result.append(_failed(display, [whole.at(pos, "", message)]))
            continue
        whole.data = data
        result.extend(_objects(whole, walked, data, ()))
    return result


def _failed(display: str, problems: list[Problem]) -> RuleDocument:
    return RuleDocument(MarkedDocument(file=display), problems, ())


def _objects(
    whole: MarkedDocument, walked: list[Problem], data: dict[str, Any], prefix: KeyPath
) -> list[RuleDocument]:
    """The rule documents of one object at `prefix`: itself, or a List's items."""
    if not is_kubernetes_object(data):
        # A plain rule file as one document of several: read it as it is.
        return [_sub(whole, walked, data, prefix)]
    kind, api = str(data.get("kind")), str(data.get("apiVersion"))
    dotted = ".".join(map(str, prefix))
    if kind in {"List", f"{KIND}List"}:
        items = data.get("items")
        if not isinstance(items, list):
            where = (*prefix, "items")
            return [_failed(whole.file, [whole.problem(where, "a List needs a list of items")])]
        found: list[RuleDocument] = []
        for i, item in enumerate(items):
            where = (*prefix, "items", i)
            if not isinstance(item, dict):
                problem = whole.problem(where, "a List item must be a PrometheusRule mapping")
                found.append(_failed(whole.file, [problem]))
            else:
                found.extend(_objects(whole, walked, item, where))
        return found
    if kind != KIND:
        message = f'kind "{kind}" is not a {KIND} (rules are read from {KIND} objects only)'
        key = f"{dotted}.kind" if dotted else "kind"
        return [_failed(whole.file, [whole.problem((*prefix, "kind"), message, key=key)])]
    if api != API_VERSION:
        message = f'apiVersion "{api}" of a {KIND} must be "{API_VERSION}"'
        where = (*prefix, "apiVersion")
        return [_failed(whole.file, [whole.problem(where, message)])]
    spec = data.get("spec")
    if not isinstance(spec, dict):
        message = f"a {KIND} needs a 'spec' mapping with 'groups'"
        return [_failed(whole.file, [whole.problem((*prefix, "spec"), message)])]
    return [_sub(whole, walked, spec, (*prefix, "spec"))]


def _sub(
    whole: MarkedDocument, walked: list[Problem], data: dict[str, Any], prefix: KeyPath
) -> RuleDocument:
    """The part of `whole` at `prefix` as a document of its own (absolute positions kept)."""
    size = len(prefix)
    doc = MarkedDocument(
        file=whole.file,
        data=data,
        key_at={p[size:]: pos for p, pos in whole.key_at.items() if p[:size] == prefix},
        value_at={p[size:]: pos for p, pos in whole.value_at.items() if p[:size] == prefix},
    )
    head = ".".join(map(str, prefix))
    inside: list[Problem] = []
    for problem in walked:  # duplicate keys inside this object, keyed relative to it
        if not head:
            inside.append(problem)
        elif problem.key.startswith(head + "."):
            inside.append(replace(problem, key=problem.key[len(head) + 1 :]))
    return RuleDocument(doc, inside, prefix)
