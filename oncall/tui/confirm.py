"""The preview/confirm modal of one remediation: "execute? [Yes] [No] [Details]".

It shows the exact target (with its UID), before → after, the server's dry run and every
guard's verdict; Details shows the full request. A dangerous action's Yes stays disabled until
the target's name is typed exactly; any refusing guard disables Yes for good and says why (and,
for the Lease, who holds it since when). Keyboard only: tab moves, enter presses, esc is No.

The screen does not run anything. Whoever pushed it awaits `answer` (True: Yes); after Yes it
stays up, shows the `Progress` lines posted to it and then the `Finished` result, and the next
key closes it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from oncall.model.write_path import GuardVerdict, Preview, RemediationResult
from oncall.tui.paint import styled
from oncall.tui.terminal_safe import safe_text

Phase = Literal["asking", "running", "done"]

#: Result statuses: a symbol that reads without colour, and the theme colour.
RESULT_LOOK = {
    "verified": ("✓", "success"),
    "succeeded": ("✓", "success"),
    "unverified": ("!", "warning"),
    "declined": ("-", "foreground-muted"),
    "refused": ("✗", "error"),
    "failed": ("✗", "error"),
    "not planned": ("✗", "error"),
}


def shown(value: Any) -> str:
    """A before/after/dry-run value on one line: text as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)


def verdict_lines(verdict: GuardVerdict) -> list[str]:
    """'✓ ok       read-only: not in read-only mode', and who holds a refusing Lease."""
    mark = "✓ ok     " if verdict.ok else "✗ REFUSED"
    if verdict.ok and verdict.warning:  # passes, but must be read (capacity_guard.py)
        mark = "! WARN   "
    lines = [f"{mark} {verdict.guard}: {verdict.reason}"]
    if not verdict.ok and verdict.holder and verdict.holder not in verdict.reason:
        lines.append(f"            held by {holder_text(verdict)}")
    return lines


def holder_text(verdict: GuardVerdict) -> str:
    """'bob@ops-2 since 2026-01-01T00:00:00+00:00'."""
    return f"{verdict.holder} since {verdict.since}" if verdict.since else f"{verdict.holder}"


def result_text(result: RemediationResult) -> str:
    """The outcome in words: status, message, who holds the Lease, the audit action id."""
    symbol, _ = RESULT_LOOK.get(result.status, ("?", None))
    lines = [f"{symbol} {result.status}: {result.message}"]
    refusal = result.refusal
    if refusal is not None and refusal.holder:
        lines.append(f"  the Lease is held by {holder_text(refusal)}")
    if result.action_id:
        lines.append(f"  audit action {result.action_id}")
    if result.undo_command:
        lines.append(f"  to undo: {result.undo_command}")
    return "\n".join(lines)


class ConfirmScreen(ModalScreen[None]):
    """Preview of one remediation; Yes, No or Details; then its progress and result."""

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    #confirm-box {
        width: 90%;
        max-width: 100;
        height: 90%;
        max-height: 40;
        padding: 0 1;
        border: round $primary;
        border-title-style: bold;
        background: $surface;
    }
    ConfirmScreen.-dangerous #confirm-box {
        border: heavy $error;
    }
    #confirm-body {
        height: 1fr;
    }
    #confirm-request, #confirm-progress {
        display: none;
        margin-top: 1;
    }
    #confirm-request.-shown, #confirm-progress.-shown {
        display: block;
    }
    #confirm-prompt {
        height: auto;
        margin-top: 1;
    }
    #confirm-word {
        margin: 0 0 0 0;
    }
    #confirm-buttons {
        height: 1;
        margin-top: 1;
    }
    #confirm-buttons Button {
        margin-right: 2;
    }
    #confirm-hint {
        height: 1;
        color: $text-muted;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "no", "No", id="confirm.no"),
        Binding("y", "yes", "Yes", show=False, id="confirm.yes"),
        Binding("d", "details", "Details", show=False, id="confirm.details"),
        # The modal is answered first: q here must not quit the app under a running action.
        Binding("q", "stay", show=False, id="confirm.stay"),
    ]

    @dataclass
    class Progress(Message):
        """One line of what the confirmed action is doing."""

        line: str

    @dataclass
    class Finished(Message):
        """The confirmed action ended."""

        result: RemediationResult

    def __init__(self, preview: Preview, *, alert: str, proposal: str) -> None:
        super().__init__()
        self.preview = preview
        self.alert = alert
        self.proposal = proposal
        #: The person's answer; True once Yes is pressed, False on No, esc or closing.
        self.answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.phase: Phase = "asking"
        self.lines: list[str] = []
        self.result: RemediationResult | None = None
        if preview.plan.dangerous:
            self.add_class("-dangerous")

    @property
    def refused(self) -> tuple[GuardVerdict, ...]:
        return self.preview.refused

    @property
    def needs_word(self) -> bool:
        """A dangerous action, or any in production, that guards allow: the word is typed."""
        return self.preview.plan.needs_typing and not self.refused

    @property
    def confirmed(self) -> bool:
        return self.answer.done() and not self.answer.cancelled() and self.answer.result()

    def compose(self) -> ComposeResult:
        plan = self.preview.plan
        box = Vertical(id="confirm-box")
        box.border_title = f"Confirm: {plan.action}" + (" — DANGEROUS" if plan.dangerous else "")
        with box:
            with VerticalScroll(id="confirm-body"):
                yield Static(safe_text(self.preview_text()), id="confirm-preview", markup=False)
                yield Static(self.request_text(), id="confirm-request", markup=False)
                yield Static(id="confirm-progress", markup=False)
            yield Static(self.prompt_text(), id="confirm-prompt", markup=False)
            if self.needs_word:
                yield Input(placeholder=plan.confirm_word, id="confirm-word", compact=True)
            with Horizontal(id="confirm-buttons"):
                yield Button(
                    "Yes",
                    id="yes",
                    variant="error" if plan.dangerous else "primary",
                    compact=True,
                    disabled=bool(self.refused) or self.needs_word,
                )
                yield Button("No", id="no", compact=True)
                yield Button("Details", id="details", compact=True)
            yield Static(self.hint_text(), id="confirm-hint", markup=False)

    def on_mount(self) -> None:
        # Never Yes first: the modal may open while the person is still typing elsewhere.
        if self.needs_word:
            self.query_one("#confirm-word", Input).focus()
        else:
            self.query_one("#no", Button).focus()

    def on_unmount(self) -> None:
        if not self.answer.done():
            self.answer.set_result(False)  # closed without an answer: nothing runs

    # -- text ------------------------------------------------------------------------------

    def preview_text(self) -> Text:
        plan = self.preview.plan
        target = plan.target
        out = Text(end="")
        out.append(f"{target.label}", style="bold")
        if target.uid:
            out.append(f"  UID {target.uid}")
        if plan.cluster is not None:  # which cluster: context, kube context, API server
            production = "error" if plan.cluster.production else None
            out.append("\n")
            out.append(styled(self.app, f"in {plan.cluster.label}", production, bold=True))
        out.append(f"\nalert {self.alert} · proposed: {self.proposal}\n")
        out.append(f"before   {shown(plan.before)}\n")
        out.append(f"after    {shown(plan.after)}\n")
        out.append(f"dry run  {shown(self.preview.dry_run)}\n")
        for note in plan.notes:
            out.append(f"note     {note}\n")
        out.append("guards\n")
        for verdict in self.preview.verdicts:
            for i, line in enumerate(verdict_lines(verdict)):
                colour = (
                    None
                    if i
                    else (("warning" if verdict.warning else "success") if verdict.ok else "error")
                )
                out.append(styled(self.app, f"  {line}", colour))
                out.append("\n")
        out.rstrip()
        return out

    def request_text(self) -> str:
        plan = self.preview.plan
        request = json.dumps(plan.request, indent=2, default=str)
        parts = [f"request\n{request}"]
        if plan.params:
            parts.append(f"params  {json.dumps(plan.params, default=str, sort_keys=True)}")
        if plan.undo is not None:
            parts.append(f"undo    {json.dumps(plan.undo, default=str, sort_keys=True)}")
        return "\n".join(parts)

    def prompt_text(self) -> Text:
        if self.refused:
            first = self.refused[0]
            why = f"held by {holder_text(first)}" if first.holder else first.reason
            text = styled(self.app, f"✗ Refused by {first.guard}: {why}.", "error")
            text.append(" Yes is disabled.")
            return text
        word = self.preview.plan.confirm_word
        cluster = self.preview.plan.cluster
        if self.needs_word and cluster is not None and cluster.production:
            return Text(f"Production: type the context and target ({word}) to enable Yes:", end="")
        if self.needs_word:
            return Text(f"Type the target's name ({word}) to enable Yes:", end="")
        return Text("Run it now? Yes confirms; the guards are checked again first.", end="")

    def hint_text(self) -> str:
        if self.phase == "asking":
            return "tab moves · enter presses · esc = No · d details"
        if self.phase == "running":
            return "running — the action cannot be cancelled from here; wait for its result"
        return "press any key to close"

    def show_progress(self) -> None:
        progress = self.query_one("#confirm-progress", Static)
        text = Text("progress\n", style="bold", end="")
        for line in self.lines:
            text.append(f"  … {line}\n")
        if self.result is not None:
            _, colour = RESULT_LOOK.get(self.result.status, ("?", None))
            text.append(styled(self.app, result_text(self.result), colour, bold=True))
        elif not self.lines:
            text.append("  starting…")
        text.rstrip()
        progress.update(safe_text(text))
        self.query_one("#confirm-body", VerticalScroll).scroll_end(animate=False)

    # -- answers ---------------------------------------------------------------------------

    def word_matches(self) -> bool:
        if not self.needs_word:
            return True
        typed = self.query_one("#confirm-word", Input).value
        return typed.strip() == self.preview.plan.confirm_word

    def yes_allowed(self) -> bool:
        return self.phase == "asking" and not self.refused and self.word_matches()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.query_one("#yes", Button).disabled = not self.yes_allowed()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.yes_allowed():
            self.action_yes()
        else:
            self.app.bell()  # a wrong name does nothing

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "yes":
            self.action_yes()
        elif event.button.id == "no":
            self.action_no()
        elif event.button.id == "details":
            self.action_details()

    def action_yes(self) -> None:
        if not self.yes_allowed():
            return
        self.phase = "running"
        self.answer.set_result(True)
        for selector in ("#yes", "#no", "#confirm-word"):
            for widget in self.query(selector):
                widget.disabled = True
                widget.display = False
        self.query_one("#confirm-prompt", Static).update(
            Text("Confirmed. Running…", style="bold", end="")
        )
        self.query_one("#confirm-hint", Static).update(self.hint_text())
        self.query_one("#confirm-progress", Static).add_class("-shown")
        self.query_one("#details", Button).focus()
        self.show_progress()

    def action_no(self) -> None:
        if self.phase == "asking":
            self.answer.set_result(False)
            self.dismiss()
        elif self.phase == "done":
            self.dismiss()

    def action_details(self) -> None:
        if self.phase == "done":
            self.dismiss()
            return
        request = self.query_one("#confirm-request", Static)
        request.toggle_class("-shown")
        self.query_one("#details", Button).label = (
            "Hide details" if request.has_class("-shown") else "Details"
        )

    def action_stay(self) -> None:
        if self.phase == "done":
            self.dismiss()

    def on_confirm_screen_progress(self, message: Progress) -> None:
        self.lines.append(message.line)
        self.show_progress()

    def on_confirm_screen_finished(self, message: Finished) -> None:
        result = self.result = message.result
        self.phase = "done"
        symbol, colour = RESULT_LOOK.get(result.status, ("?", None))
        prompt = styled(self.app, f"{symbol} {result.status}", colour, bold=True)
        self.query_one("#confirm-prompt", Static).update(prompt)
        self.query_one("#confirm-hint", Static).update(self.hint_text())
        self.show_progress()
        for button in self.query(Button):
            button.disabled = True
        self.query_one("#confirm-buttons").display = False
        self.query_one("#confirm-body", VerticalScroll).focus()

    def on_key(self, event: events.Key) -> None:
        if self.phase == "done":
            event.stop()
            event.prevent_default()
            self.dismiss()
