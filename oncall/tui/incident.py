"""The incident screen of one alert: its checklist streaming in, a step's evidence, proposals.

Steps appear as the runbook plans them (queued), turn `running` with their age when their probe
begins, and take their status, duration and summary when decided. The pane below shows the
highlighted step's evidence against its thresholds, the probe's command-line equivalent and the
reason; the proposals of the whole run are listed, numbered.

Under the title, a chart of the alert's expression over the last hour (`[`/`]` zoom between
15m and 24h) with its threshold, states and the oncall actions taken; under the evidence, a
chart of each PromQL evidence value (`oncall.tui.chart_panel`).

`p` acts on the highlighted step's proposal (or the run's first), `1`–`9` on the proposal of
that number: the app's `remediation_runner` plans it in a worker, and its preview opens in the
confirm modal (`ConfirmScreen`), which the worker awaits; nothing waits on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from oncall.model.checklist_events import Proposal
from oncall.model.write_path import RemediationResult
from oncall.service.remediation import RemediationRunner
from oncall.settings import Settings
from oncall.tui.acting import ActionDoor
from oncall.tui.banner import banners
from oncall.tui.board_table import CellBatchTable
from oncall.tui.chart_panel import AlertChart, EvidenceCharts
from oncall.tui.format import (
    STATE_COLOUR,
    STATE_SYMBOL,
    STEP_COLOUR,
    STEP_SYMBOL,
    alert_value,
    duration,
    number,
    params_text,
    shown_state,
    when,
)
from oncall.tui.instances import InstancesPanel, first_instance
from oncall.tui.messages import AcknowledgeAlert, RerunChecklist, SilenceAlert
from oncall.tui.paint import styled
from oncall.tui.state import AlertBook, ChecklistRun, StepView
from oncall.tui.tables import cursor_key, new_table
from oncall.tui.terminal_safe import safe_text

COLUMNS = (("status", "Status"), ("step", "Step"), ("time", "Time"), ("summary", "Summary"))

Cell = tuple[str, str | None]


class IncidentScreen(Screen[None]):
    """One alert, its checklist run and what the run found."""

    HELP_TITLE: ClassVar[str] = "incident"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="incident.back"),
        Binding("r", "rerun", "Re-run", id="incident.rerun"),
        Binding("p", "act", "Act on proposal", id="incident.act"),
        Binding("s", "silence", "Silence", show=False, id="incident.silence"),
        Binding("a", "acknowledge", "Acknowledge", show=False, id="incident.acknowledge"),
        *(Binding(str(n), f"act({n})", show=False, id=f"incident.act-{n}") for n in range(1, 10)),
        Binding(
            "left_square_bracket", "zoom(-1)", "Zoom in", key_display="[", id="incident.zoom-in"
        ),
        Binding(
            "right_square_bracket", "zoom(1)", "Zoom out", key_display="]", id="incident.zoom-out"
        ),
    ]

    def __init__(
        self,
        alert: str,
        settings: Settings,
        book: AlertBook,
        clock: Callable[[], float],
        *,
        remediations: RemediationRunner | None = None,
    ) -> None:
        super().__init__()
        self.alert = alert
        self.remediations = remediations
        self.settings = settings
        self.book = book
        self.clock = clock
        self._keys: list[str] = []
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._composed = False  # `is_mounted` is still false while on_mount runs
        #: What the last remediation started here is doing, or how it ended.
        self.remediation_line: str | None = None

    def compose(self) -> ComposeResult:
        yield from banners(self.settings)
        yield Static(id="incident-title", markup=False)
        yield Static(id="incident-meta", markup=False)
        yield InstancesPanel(id="incident-instances", markup=False)
        self.chart = AlertChart(
            self.alert,
            self.settings,
            lambda: s.rule if (s := self.book.statuses.get(self.alert)) else None,
            self.clock,
            rows=10 if self.app.size.height >= 30 else 8,
        )
        yield self.chart
        yield new_table("steps", COLUMNS, CellBatchTable)
        with VerticalScroll(id="evidence-pane"):
            yield Static(id="evidence", markup=False)
            self.chart.evidence = EvidenceCharts(self.settings)
            yield self.chart.evidence
        yield Static(id="proposals", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._composed = True
        self.show()
        self.query_one("#steps", DataTable).focus()

    @property
    def run(self) -> ChecklistRun | None:
        return self.book.runs.get(self.alert)

    # -- rendering -------------------------------------------------------------------------

    def show(self) -> None:
        """Bring every part of the screen up to date with the run."""
        if not self._composed:
            return
        now = self.clock()
        self.query_one("#incident-title", Static).update(safe_text(self.title_text()))
        self.query_one("#incident-meta", Static).update(safe_text(self.meta_text(now)))
        self.query_one(InstancesPanel).show_status(self.book.statuses.get(self.alert), now)
        run = self.run
        steps = run.steps() if run is not None else []
        table = self.query_one("#steps", CellBatchTable)
        rows = [(v.id, self.cells(v, now)) for v in steps]
        keys = [key for key, _ in rows]
        if keys != self._keys:
            selected = self.selected_step()
            table.clear()
            for key, cells in rows:
                table.add_row(*(styled(self.app, t, c) for t, c in cells), key=key)
            if selected in keys:
                table.move_cursor(row=keys.index(selected), animate=False)
        else:
            # The running steps' times tick once a second: only those cells render again.
            table.update_cells(
                (key, column, styled(self.app, *cell), True)
                for key, cells in rows
                for (column, _), cell, before in zip(COLUMNS, cells, self._cells[key], strict=True)
                if cell != before
            )
        self._keys, self._cells = keys, dict(rows)
        self.show_evidence()
        self.query_one("#proposals", Static).update(safe_text(self.proposals_text()))
        self.chart.load()  # the first state may have arrived: asks only once per window

    def cells(self, view: StepView, now: float) -> tuple[Cell, ...]:
        colour = STEP_COLOUR.get(view.state)
        status = (f"{STEP_SYMBOL.get(view.state, '?')} {view.state}", colour)
        result = view.result
        if result is not None:
            time_text = f"{result.duration_s:.2f}s"
            summary = result.summary or result.reason or ""
        elif view.started_at is not None:
            time_text, summary = f"running {duration(now - view.started_at)}", ""
        else:
            time_text, summary = "", ""
        return (status, (view.id, None), (time_text, None), (summary, None))

    def title_text(self) -> Text:
        status = self.book.statuses.get(self.alert)
        if status is None:
            return Text(f"{self.alert}  (no state yet)", end="")
        state = shown_state(status)
        text = styled(self.app, f"{STATE_SYMBOL[state]} {state}", STATE_COLOUR[state], bold=True)
        parts = [self.alert, status.rule.severity]
        if status.value is not None:
            rule = status.rule
            parts.append(f"value {alert_value(status.value, rule.threshold, rule.unit)}")
        parts.append(when(status, self.clock()))
        if status.silent and status.liveness is not None:
            parts.append(f"cannot fire here: {status.liveness.text}")
        text.append("  " + "  ".join(p for p in parts if p))
        return text

    def meta_text(self, now: float) -> str:
        verdict = self.book.at_firing.get(self.alert)
        if verdict is None:
            return self.live_meta(now)
        from oncall.model.verdicts import verdict_findings

        ran = duration(max(0.0, now - float(verdict.get("ran_at") or now)))
        then = f"then (at firing, {ran} ago): {verdict_findings(verdict)}"
        return f"{then}\nnow: {self.live_meta(now)}"

    def live_meta(self, now: float) -> str:
        run = self.run
        if run is None:
            return "no checklist run yet — r runs it"
        steps = run.steps()
        if run.running:
            decided = sum(1 for v in steps if v.result is not None)
            head = f"checklist running {duration(now - run.started_at)}"
            head += f" · {decided}/{len(steps)} steps" if steps else " · waiting for the runbook"
        else:
            finished = run.finished_at if run.finished_at is not None else now
            age = duration(now - finished)
            if run.error and not run.results:
                return f"checklist stopped {age} ago: {run.error}"
            head = f"results {age} old · {run.findings()}"
            if run.error:
                head += f" · stopped: {run.error}"
        return f"{head} · {run.runbook}" if run.runbook else head

    def selected_step(self) -> str | None:
        return cursor_key(self.query_one("#steps", DataTable))

    def show_evidence(self) -> None:
        self.query_one("#evidence", Static).update(safe_text(self.evidence_text()))
        run, step = self.run, self.selected_step()
        if self.chart.evidence is not None:
            self.chart.evidence.show_step(run.results.get(step) if run and step else None)

    def evidence_text(self) -> Text:
        """The highlighted step: status, reason, evidence with thresholds, command line."""
        run = self.run
        if run is None:
            return Text("", end="")
        if not run.steps():
            return Text(run.error or "waiting for the checklist to start…", end="")
        wanted = self.selected_step()
        view = next((v for v in run.steps() if v.id == wanted), None)
        if view is None:
            return Text("", end="")
        out = Text(f"{view.title}  ({view.id})\n", style="bold", end="")
        state_line = f"{STEP_SYMBOL.get(view.state, '?')} {view.state}"
        out.append(styled(self.app, state_line, STEP_COLOUR.get(view.state)))
        result = view.result
        if result is None:
            if not run.running:
                out.append(": not decided, the run stopped")
            elif view.started_at is not None:
                out.append(
                    f" for {duration(self.clock() - view.started_at)}: probe not answered yet"
                )
            else:
                out.append(": waiting for the steps it needs, or for a free slot")
            self.append_at_firing(out, view.id)
            return out
        out.append(f" in {result.duration_s:.2f}s · probe {result.probe}")
        out.append(f" (timeout {result.timeout_s:g}s)\n")
        if result.summary:
            out.append(f"{result.summary}\n")
        if result.reason and result.reason != result.summary:
            out.append(f"reason: {result.reason}\n")
        for item in result.evidence:
            unit = f" {item.unit}" if item.unit else ""
            line = f"  {item.label}: {number(item.value)}{unit}"
            if item.threshold is not None:
                line += f"  (threshold {number(item.threshold)}{unit})"
            if item.error:
                line += f"  [could not evaluate: {item.error}]"
            out.append(line + "\n")
        if result.equivalent:
            out.append(f"$ {result.equivalent}\n", style="italic")
        self.append_at_firing(out, view.id)
        for proposal in result.proposals:
            out.append(f"proposes: {proposal_line(proposal)}\n")
        out.rstrip()
        return out

    def append_at_firing(self, out: Text, step_id: str) -> None:
        """The same step as `oncall serve` found it when the alert fired (then), below now."""
        verdict = self.book.at_firing.get(self.alert)
        if verdict is None:
            return
        from oncall.model.verdicts import step_of

        then = step_of(verdict, step_id)
        if then is None:
            out.append("\nat firing: this step did not run\n")
            return
        state = str(then.get("status"))
        out.append("\nat firing: ")
        out.append(
            styled(self.app, f"{STEP_SYMBOL.get(state, '?')} {state}", STEP_COLOUR.get(state))
        )
        out.append(f" · {then.get('summary') or then.get('reason') or ''}\n")
        for item in then.get("evidence") or []:
            unit = f" {item.get('unit')}" if item.get("unit") else ""
            line = f"  {item.get('label')}: {number(item.get('value'))}{unit}"
            if item.get("threshold") is not None:
                line += f"  (threshold {number(item.get('threshold'))}{unit})"
            out.append(line + "\n")

    def proposals_text(self) -> str:
        run = self.run
        proposals = self.proposals()
        last = [f"Last action: {self.remediation_line}"] if self.remediation_line else []
        if not proposals:
            none = "Proposals: none" + (" yet" if run is not None and run.running else "")
            return "\n".join([*last, none])
        lines = [*last, "Proposals (p: the highlighted step's · 1-9: by number):"]
        lines += [f"  {i} → {p.step}: {proposal_line(p)}" for i, p in enumerate(proposals, 1)]
        return "\n".join(lines)

    def proposals(self) -> list[Proposal]:
        """Every proposal of the run, numbered from 1 in this order on screen."""
        run = self.run
        return [p for r in run.ordered_results() for p in r.proposals] if run else []

    # -- actions ---------------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.show_evidence()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # enter on a step keeps the evidence pane where it is

    def action_back(self) -> None:
        self.dismiss()

    def action_zoom(self, delta: int) -> None:
        self.chart.zoom(delta)

    def action_rerun(self) -> None:
        self.post_message(RerunChecklist(self.alert))

    def action_silence(self) -> None:
        """`s`: the silence modal of the instances panel's first (worst) instance."""
        worst = first_instance(self.book.statuses.get(self.alert))
        self.post_message(SilenceAlert(self.alert, worst))

    def action_acknowledge(self) -> None:
        self.post_message(AcknowledgeAlert(self.alert))

    def action_act(self, number: int | None = None) -> None:
        """Remediate: proposal `number`, else the highlighted step's, else the run's first."""
        proposals = self.proposals()
        if number is not None:
            if not 1 <= number <= len(proposals):
                self.notify(f"no proposal {number}", severity="warning")
                return
            proposal = proposals[number - 1]
        else:
            step = self.selected_step()
            own = [p for p in proposals if p.step == step]
            candidates = own or proposals
            if not candidates:
                self.notify("no proposal to act on", severity="warning")
                return
            proposal = next((p for p in candidates if not p.error), candidates[0])
        self.remediate(proposal)

    def remediate(self, proposal: Proposal) -> None:
        """Start `proposal` in a worker of the app: it outlives this screen once confirmed."""
        if proposal.error:
            self.notify(f"not actionable: {proposal.error}", severity="warning")
            return
        run = self.run
        evidence = run.results.get(proposal.step) if run is not None else None
        door = ActionDoor(self.app, lambda: self.remediations, self.book.statuses)
        started = door.start(
            proposal, self.alert, evidence=evidence, say=self.say, done=self._acted
        )
        if started:
            self.remediation_line = f"planning {proposal.title} ({proposal.action})…"
            self.show()

    def say(self, line: str) -> None:
        """What the action started here is doing, under the proposals."""
        self.remediation_line = line
        self.show()

    def _acted(self, result: RemediationResult) -> None:
        if result.status == "verified":
            self.chart.follow()  # the signal should bend: keep the chart fresh a while


def proposal_line(proposal: Proposal) -> str:
    """'Lower --max-num-seqs to 64 (set-max-num-seqs max_num_seqs=64) [dangerous]'."""
    params = params_text(proposal.params)
    line = f"{proposal.title} ({proposal.action}{' ' + params if params else ''})"
    if proposal.dangerous:
        line += " [dangerous]"
    if proposal.error:
        line += f" [not actionable: {proposal.error}]"
    return line
