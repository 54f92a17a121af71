"""Checklists for the CLI and the app: find an alert's runbook, run it live against backends.

Runbooks are found as `<AlertName>.yaml` (or any file whose `alert:` names it) in the folders
of `runbooks.dirs`, then `./runbooks`, then the `runbooks/` folder of this checkout. A live run
shares one `ProbeContext` (one client per backend) and streams the engine's events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from oncall.checklist.compiled import CompiledRunbook, CompiledStep
from oncall.checklist.engine import run_checklist
from oncall.checklist.loader import load_runbook, runbook_files
from oncall.checklist.matching import Matched, best_match, matching_runbooks
from oncall.errors import ConfigError, Problem, UsageError
from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import ChecklistEvent
from oncall.probes.base import Facts
from oncall.probes.context import ProbeContext
from oncall.settings import Settings
from oncall.settings.yaml_marks import current_limits, load_marked_yaml

CHECKOUT_RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"


def runbook_dirs(settings: Settings) -> list[Path]:
    return list(dict.fromkeys([*settings.runbooks.dirs, Path("runbooks"), CHECKOUT_RUNBOOKS]))


def find_runbook(settings: Settings, alert: str, labels: Mapping[str, str] | None = None) -> Path:
    """The runbook file for `alert`: by file name first, then by its `alert:` key, then the
    most specific `match:` on the alert's labels (see `oncall.checklist.matching`)."""
    dirs = _distinct([d for d in runbook_dirs(settings) if d.is_dir()])
    for folder in dirs:
        for ext in (".yaml", ".yml"):
            if (folder / f"{alert}{ext}").is_file():
                return folder / f"{alert}{ext}"
    entries = RUNBOOK_INDEX.entries(dirs)
    for file, entry in entries:
        if entry.alert == alert:
            return file
    candidates = [dataclasses.replace(e.matched, path=f) for f, e in entries if e.matched]
    matched = best_match(candidates, {**(labels or {}), "alertname": alert})
    if matched is not None:
        return matched
    searched = ", ".join(str(d) for d in runbook_dirs(settings))
    raise UsageError(f"no runbook for alert {alert!r} in {searched}")


@dataclasses.dataclass(frozen=True, slots=True)
class _Entry:
    """What `find_runbook` needs of one runbook file: its `alert:` and its `match:`."""

    alert: object
    matched: Matched | None


class RunbookIndex:
    """Each runbook file's `alert:` and `match:`, parsed once while the file is unchanged.

    The app looks up the runbook of every label-matched alert it runs a checklist for, and
    parsing all the runbooks costs ~60 ms of CPU each time (24 times a minute in the fleet
    soak). A file is parsed again when its stat (mtime, ctime, size, inode) or the YAML
    limits change; the files are listed again on every call, so an added or removed file
    is seen at once. Keyed on absolute paths: `runbooks` means another folder after a chdir.
    """

    #: Folder lists remembered (one per settings in practice; tests make many).
    MAX_LISTS = 16

    def __init__(self) -> None:
        self._by_dirs: dict[tuple[Path, ...], dict[Path, tuple[object, _Entry]]] = {}
        self.parses = 0  # files parsed, for tests and benchmarks
        self._lock = threading.Lock()  # lookups run in threads (`asyncio.to_thread`)

    def entries(self, dirs: list[Path]) -> list[tuple[Path, _Entry]]:
        """Every runbook file under `dirs`, in search order, with its entry."""
        key = tuple(d.absolute() for d in dirs)
        limits = current_limits()
        with self._lock:
            old = self._by_dirs.pop(key, {})
            fresh: dict[Path, tuple[object, _Entry]] = {}
            found = []
            for file in runbook_files(dirs):
                stamp = _stamp(file, limits)
                absolute = file.absolute()
                cached = old.get(absolute)
                if cached is not None and stamp is not None and cached[0] == stamp:
                    entry = cached[1]
                else:
                    entry = self._parse(file)
                fresh[absolute] = (stamp, entry)
                found.append((file, entry))
            self._by_dirs[key] = fresh  # only files listed now: removed ones are forgotten
            while len(self._by_dirs) > self.MAX_LISTS:
                del self._by_dirs[next(iter(self._by_dirs))]
            return found

    def _parse(self, file: Path) -> _Entry:
        self.parses += 1
        doc, problems = load_marked_yaml(file)
        matched = matching_runbooks([file], lambda _: (doc, problems))
        alert = doc.data.get("alert") if not problems else None
        return _Entry(alert, matched[0] if matched else None)


RUNBOOK_INDEX = RunbookIndex()
#: A file modified this recently is parsed again on the next lookup (see `_stamp`).
RACY_NS = 2_000_000_000


def _stamp(file: Path, limits: object) -> object:
    """What says `file` is unchanged since it was parsed; None (parse it every time) for a
    file gone since listed (the read reports it) or modified too recently to tell: a second
    write of the same size in the same timestamp tick would not change the stat (the
    "racy git" problem), and a file a second old will soon be cached anyway."""
    try:
        st = file.stat()
    except OSError:
        return None
    if time.time_ns() - st.st_mtime_ns < RACY_NS:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, limits)


def _distinct(dirs: list[Path]) -> list[Path]:
    """The folders without a second name for one already listed (`runbooks` is the
    checkout's `runbooks/` when run from the checkout): it would only find the same files."""
    seen: set[Path] = set()
    kept = []
    for folder in dirs:
        real = folder.resolve()
        if real not in seen:
            seen.add(real)
            kept.append(folder)
    return kept


def load_checked(path: Path, settings: Settings | None = None) -> CompiledRunbook:
    """Load a runbook, or raise ConfigError with every problem (FILE:LINE:COL).

    The `runbooks.vars` setting overrides the runbook's vars of the same names (only those:
    a setting cannot add names the runbook's expressions were not compiled against).
    """
    loaded = load_runbook(path)
    if loaded.runbook is None:
        raise ConfigError(loaded.problems, what="runbook")
    runbook = loaded.runbook
    overrides = settings.runbooks.vars if settings else {}
    known = {k: v for k, v in overrides.items() if k in runbook.spec.vars}
    if known:
        spec = runbook.spec.model_copy(update={"vars": {**runbook.spec.vars, **known}})
        runbook = dataclasses.replace(runbook, spec=spec)
    return runbook


def alert_facts(name: str, status: RuleStatus | None) -> dict[str, Any]:
    """The `alert` name of expressions: the alert's current state, value and labels."""
    if status is None:
        return {"name": name, "state": "unknown", "value": None, "labels": {}, "annotations": {}}
    instance = next(
        (i for want in ("firing", "pending") for i in status.instances if i.state == want),
        None,
    )
    labels = dict(status.rule.labels)
    if instance is not None:
        labels.update(instance.labels)
    return {
        "name": name,
        "state": status.state,
        "value": status.value,
        "labels": labels,
        # Expanded for the instance (by Prometheus or the local evaluation), not the raw
        # templates: audit records carry these.
        "annotations": dict(instance.annotations if instance else status.rule.annotations),
    }


class LiveRunner:
    """The engine's probe call for live runs: validate the rendered params, run the probe.

    Steps that ask the same probe with the same parameters (two judgements of one
    `vllm.rates` answer) share one call: the probe runs once per checklist run. Each step
    still waits under its own timeout; `cancel` stops calls nobody waits for any more.
    """

    def __init__(self, ctx: ProbeContext) -> None:
        self.ctx = ctx
        self.calls: dict[str, asyncio.Task[Facts]] = {}

    async def __call__(self, step: CompiledStep, params: dict[str, Any]) -> Facts:
        probe = step.probe
        validated = probe.params.model_validate(params)
        key = probe.name + json.dumps(validated.model_dump(mode="json"), sort_keys=True)
        call = self.calls.get(key)
        if call is None:
            call = asyncio.ensure_future(probe.run(self.ctx, validated))
            self.calls[key] = call
        # Shielded: one step giving up at its timeout must not cancel the others' answer.
        return await asyncio.shield(call)

    async def cancel(self) -> None:
        pending = [c for c in self.calls.values() if not c.done()]
        for call in pending:
            call.cancel()
        await asyncio.gather(*self.calls.values(), return_exceptions=True)


def describe(ctx: ProbeContext) -> Any:
    """The command-line equivalent of a step's probe call, for the evidence pane."""

    def equivalent(step: CompiledStep, params: dict[str, Any]) -> str | None:
        probe = step.probe
        return probe.equivalent(ctx, probe.params.model_validate(params))

    return equivalent


async def stream_checklist(
    settings: Settings,
    runbook: CompiledRunbook,
    alert: Mapping[str, Any],
    *,
    ctx: ProbeContext | None = None,
) -> AsyncIterator[ChecklistEvent]:
    """Run `runbook` live; a context handed in is reused and left open (the app keeps one)."""
    own = ctx is None
    context = ctx or ProbeContext(settings)
    runner = LiveRunner(context)
    try:
        async for event in run_checklist(runbook, alert, runner, describe=describe(context)):
            yield event
    finally:
        await runner.cancel()
        if own:
            await context.aclose()


def problems_of(paths: list[Path]) -> list[Problem]:
    """Lint: every problem of every runbook file under paths."""
    return lint_of(paths)[0]


def lint_of(paths: list[Path]) -> tuple[list[Problem], list[Problem]]:
    """Lint: (problems, warnings) of every runbook file under paths."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    for file in runbook_files(paths):
        loaded = load_runbook(file)
        problems.extend(loaded.problems)
        warnings.extend(loaded.warnings)
    return problems, warnings
