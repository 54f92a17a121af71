"""Property-based fuzzing (issue 12, acceptance 2): settings files, runbooks, rule files and
command lines made by hypothesis, hostile on purpose (anchors and aliases, tags, control
characters, deep brackets, huge numbers, bytes that are not UTF-8). Whatever comes in: no
exception escapes, nothing hangs (each example under a deadline), and every problem with a
file names it with LINE:COL.

Bounded in time by the "oncall-security" profile (examples and deadline); FUZZ_EXAMPLES
raises the count for a longer local run. A corpus of hostile files made elsewhere can be
pointed at with HOSTILE_CORPUS=DIR: each file goes through all three loaders.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncall.alerts.loader import load_rule_files
from oncall.checklist.loader import load_runbook
from oncall.errors import EXIT_INCOMPLETE, ConfigError, Problem
from oncall.settings import load_settings
from oncall.settings.loader import leaf_paths
from tests.security.hostile_cli import process_state_restored, run_inprocess

settings.register_profile(
    "oncall-security",
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "100")),
    deadline=timedelta(seconds=10),  # a guard against hangs, far above a normal example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=False,
)
FUZZ = settings.get_profile("oncall-security")
REPO = Path(__file__).resolve().parents[2]


def _corpus() -> list[Path]:
    folder = os.environ.get("HOSTILE_CORPUS")
    return sorted(p for p in Path(folder).rglob("*") if p.is_file()) if folder else []


def over_hostile_corpus(test: Callable[[Path], None]) -> Callable[[Path], None]:
    """`test(path)` once per file of the corpus HOSTILE_CORPUS names; skipped without one."""
    files = _corpus()
    skipped = pytest.mark.skipif(not files, reason="HOSTILE_CORPUS names no folder of files")
    return pytest.mark.parametrize("path", files, ids=str)(skipped(test))


HOSTILE_TOKENS = [
    "&a ", "*a", "&b [*a, *a, *a, *a]", "<<: *a\n", "!!python/object:os.system ", "!!int ",
    "!!float ", "!!binary ", "!!timestamp ", "!!set ", "!!omap ", "!<tag:x> ", "[", "]", "{",
    "}", ": ", "- ", "? ", "\t", "\x00", "\x07", "\x1b[2J", "\ufeff", "\u2028", "'", '"',
    "%YAML 1.1\n", "%TAG ! tag:x,2000:\n", "---\n", "...\n", "|", ">-", "#", "9" * 5000,
    "1e400", "-.inf", ".nan", "0x" + "f" * 50, "\r", "\n", "\n  ", "~", "null", "\udcff",
    "http://u:p@[::1", "http://h:99999", "${HOME}", "{{ alert.labels.x }}", "[" * 200,
]  # fmt: skip

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
    st.sampled_from(["5s", "1m30s", "http://127.0.0.1:1", "redis://:pw@h:1/0", "9" * 400]),
)  # fmt: skip
structures = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=24,
)


def _settings_shaped() -> st.SearchStrategy[object]:
    """Mappings with real settings keys, so validation (not only parsing) is exercised."""
    dotted = [p for p in leaf_paths()]

    def nest(pairs: list[tuple[tuple[str, ...], object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for path, value in pairs:
            node = out
            for part in path[:-1]:
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    break
                node = child
            else:
                node[path[-1]] = value
        return out

    return st.lists(st.tuples(st.sampled_from(dotted), structures), max_size=6).map(nest)


def _dump(value: object) -> str:
    try:
        return yaml.safe_dump(value, allow_unicode=True)
    except (yaml.YAMLError, ValueError, OverflowError):
        return "x: 1\n"


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[str]) -> str:
    """A text with hostile tokens inserted at random places."""
    text = draw(base)
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(HOSTILE_TOKENS)) + text[at:]
    return text


def _real(path: str) -> st.SearchStrategy[str]:
    return st.just((REPO / path).read_text(encoding="utf-8"))


raw_text = st.lists(st.sampled_from(HOSTILE_TOKENS) | st.text(max_size=6), max_size=30).map("".join)
settings_text = st.one_of(
    structures.map(_dump), _settings_shaped().map(_dump),
    mutated(_settings_shaped().map(_dump)), raw_text,
)  # fmt: skip
runbook_text = st.one_of(
    mutated(_real("runbooks/LLMHighP99Latency.yaml")), structures.map(_dump), raw_text
)
rules_text = st.one_of(mutated(_real("alerts/ai-service.yaml")), structures.map(_dump), raw_text)


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


def _located(problems: list[Problem], path: Path) -> None:
    assert problems
    for problem in problems:
        assert problem.file == str(path), problem
        assert problem.line is not None and problem.col is not None, problem
        assert problem.line >= 1 and problem.col >= 1, problem


def _check_settings(path: Path) -> None:
    try:
        with process_state_restored():
            load_settings(config=path, environ={})
    except ConfigError as exc:
        _located(exc.problems, path)


def _check_runbook(path: Path) -> None:
    result = load_runbook(path)
    if result.runbook is None:
        _located(result.problems, path)


def _check_rules(path: Path) -> None:
    rules = load_rule_files([path])
    if rules.problems:
        _located(rules.problems, path)


@FUZZ
@given(text=settings_text)
def test_settings_files(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    _check_settings(_write(tmp_path_factory.mktemp("s"), "oncall.yaml", text))


@FUZZ
@given(text=runbook_text)
def test_runbooks(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    _check_runbook(_write(tmp_path_factory.mktemp("r"), "LLMHighP99Latency.yaml", text))


@FUZZ
@given(text=rules_text)
def test_rule_files(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    _check_rules(_write(tmp_path_factory.mktemp("a"), "rules.yaml", text))


@FUZZ
@given(environ=st.dictionaries(
    st.sampled_from(["ONCALL_" + "__".join(p).upper() for p in leaf_paths()] + ["ONCALL_X"]),
    st.one_of(st.text(max_size=20), st.sampled_from(HOSTILE_TOKENS)), max_size=4,
))  # fmt: skip
def test_environment(environ: dict[str, str]) -> None:
    try:
        with process_state_restored():
            load_settings(environ=environ, cwd=REPO / "tests" / "security")
    except ConfigError as exc:
        assert all(p.file.startswith("env ONCALL_") for p in exc.problems), exc.problems


COMMANDS = [
    ["config", "show"], ["config", "show", "-o", "json"], ["check"], ["audit", "list"],
    ["audit", "show"], ["audit", "verify"], ["runbook", "lint"], ["runbook", "schema"],
    ["config"], ["audit"], ["runbook"], ["audit", "acknowledge"], ["audit", "export"],
    ["remediate", "rollback"], ["remediate", "approve"], ["remediate", "set-degradation-level"],
    ["runbook", "test"], ["alerts", "--match"],  # (no --record: it would write into the cwd)
]  # fmt: skip
WORDS = [
    "--set", "--config", "--read-only", "-o", "json", "table", "--since", "--actor", "--target",
    "--action", "LLMHighP99Latency", "prometheus.url=http://u:p@[::1", "redis.timeout=1e400",
    "guards.rate_limit_actions=" + "9" * 500, "limits.max_yaml_depth=0", "read_only=maybe",
    "alerts.for_scale=nan", "-5", "1h", "99999999999d", "", "\x00", "../../etc/passwd", "=",
    "--", "-", "-h", "--reason", "--dry-run", "7ce3f53c2dd0", "x:alive", "٣", "x" * 300,
]  # fmt: skip


@FUZZ
@given(
    command=st.sampled_from(COMMANDS),
    words=st.lists(st.sampled_from(WORDS) | st.text(max_size=10), max_size=6),
)
def test_command_lines(
    tmp_path_factory: pytest.TempPathFactory, command: list[str], words: list[str]
) -> None:
    audit = tmp_path_factory.mktemp("audit") / "audit.jsonl"
    env = {
        # Nothing answers: a fuzzed command must never reach a real backend.
        "ONCALL_PROMETHEUS__URL": "http://127.0.0.1:1",
        "ONCALL_REDIS__URL": "redis://127.0.0.1:1/0",
        "ONCALL_VLLM__URLS": "http://127.0.0.1:1",
        "ONCALL_KUBERNETES__KUBECONFIG": str(audit.parent / "no-kubeconfig"),
        "ONCALL_AUDIT__PATH": str(audit),
    }
    ran = run_inprocess(*command, *words, env=env)
    assert ran.code in (0, 1, 2, EXIT_INCOMPLETE), ran.output
    assert "Traceback" not in ran.output and "internal error" not in ran.output, ran.output


@over_hostile_corpus
def test_hostile_corpus(path: Path) -> None:
    _check_settings(path)
    _check_runbook(path)
    _check_rules(path)
