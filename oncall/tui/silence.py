"""The silence modal (`s` on the board or the incident screen): the matchers, how long, why.

Pre-filled from the alert's labels: the one firing (else pending) instance's whole label set
when there is one, the alert's name and the rule's own labels when several fire (a silence of
the whole alert). Enter on the comment, or Preview, hands the three to the `silence` action:
its preview — the exact matchers, start and end, the comment, the author and every alert
Alertmanager would silence now (flagged when none) — opens in the confirm modal, where the
person confirms it like any other action. Esc cancels; nothing is planned before Preview.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from oncall.model.action_params import NOTE_MAX_CHARS
from oncall.model.alerts import AlertInstance, RuleStatus, split_key
from oncall.model.checklist_events import Proposal
from oncall.model.write_path import RemediationResult
from oncall.tui.acting import ActionDoor

DEFAULT_DURATION = "2h"


def matchers_of(labels: dict[str, str]) -> str:
    """'{alertname="X", pod="vllm-0"}': alertname first, then the rest sorted."""
    keys = sorted(labels, key=lambda k: (k != "alertname", k))
    values = {k: labels[k].replace("\\", "\\\\").replace('"', '\\"') for k in keys}
    return "{" + ", ".join(f'{k}="{values[k]}"' for k in keys) + "}"


def silence_target(alert: str, status: RuleStatus | None) -> AlertInstance | None:
    """The instance a silence is pre-filled from: the only firing one, else the only pending."""
    if status is None:
        return None
    for state in ("firing", "pending"):
        found = [i for i in status.instances if i.state == state]
        if found:
            return found[0] if len(found) == 1 else None
    return None


def prefill(alert: str, status: RuleStatus | None, instance: AlertInstance | None) -> str:
    """The matchers the modal opens with (see the module's docstring)."""
    if instance is not None:
        return matchers_of({"alertname": alert, **instance.labels})
    own = dict(status.rule.labels) if status is not None else {}
    return matchers_of({**own, "alertname": alert})


def silence_proposal(matchers: str, duration: str, comment: str) -> Proposal:
    return Proposal(
        id="silence",
        action="silence",
        title=f"Silence {matchers}",
        params={"matchers": matchers, "duration": duration, "comment": comment},
        step="",
    )


def ack_proposal(alert: str) -> Proposal:
    return Proposal(
        id="acknowledge", action="acknowledge", title=f"Acknowledge {alert}",
        params={"alert": alert}, step="",
    )  # fmt: skip


@dataclass(frozen=True)
class SilenceRequest:
    """What the person filled in."""

    matchers: str
    duration: str
    comment: str

    @property
    def proposal(self) -> Proposal:
        return silence_proposal(self.matchers, self.duration, self.comment)


class SilenceScreen(ModalScreen[SilenceRequest | None]):
    """Matchers, duration and comment of a new silence; Preview or Cancel."""

    DEFAULT_CSS = """
    SilenceScreen { align: center middle; }
    #silence-box {
        width: 90%; max-width: 100; height: auto; padding: 0 1;
        border: round $primary; border-title-style: bold; background: $surface;
    }
    #silence-box Static { margin-top: 1; }
    #silence-buttons { height: 1; margin-top: 1; }
    #silence-buttons Button { margin-right: 2; }
    #silence-hint { height: 1; color: $text-muted; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="silence.cancel"),
    ]

    def __init__(self, alert: str, matchers: str) -> None:
        super().__init__()
        self.alert = alert
        self.matchers = matchers

    def compose(self) -> ComposeResult:
        box = Vertical(id="silence-box")
        box.border_title = f"Silence in Alertmanager: {self.alert}"
        with box:
            yield Static("Matchers (Prometheus syntax; Alertmanager matches them)", markup=False)
            yield Input(self.matchers, id="silence-matchers", compact=True)
            yield Static("For (30m, 2h, 1d)", markup=False)
            yield Input(DEFAULT_DURATION, id="silence-duration", compact=True)
            yield Static("Comment (required: why, for everyone who sees it)", markup=False)
            yield Input(
                placeholder="e.g. rolling out vllm 0.9, back by 15:00",
                id="silence-comment", compact=True, max_length=NOTE_MAX_CHARS,
            )  # fmt: skip
            with Horizontal(id="silence-buttons"):
                yield Button("Preview", id="silence-preview", variant="primary", compact=True)
                yield Button("Cancel", id="silence-cancel", compact=True)
            yield Static(
                "the preview lists every alert it would silence now · esc cancels",
                id="silence-hint", markup=False,
            )  # fmt: skip

    def on_mount(self) -> None:
        self.query_one("#silence-comment", Input).focus()

    def request(self) -> SilenceRequest:
        def value(selector: str) -> str:
            return self.query_one(selector, Input).value.strip()

        return SilenceRequest(
            value("#silence-matchers"), value("#silence-duration"), value("#silence-comment")
        )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "silence-comment":
            self.dismiss(self.request())
        else:
            self.focus_next()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(self.request() if event.button.id == "silence-preview" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _after(changed: Callable[[], None]) -> Callable[[RemediationResult], None]:
    def done(result: RemediationResult) -> None:
        if result.status in ("verified", "unverified", "succeeded"):
            changed()  # the board shows the silence or the ack at once

    return done


def open_silence(
    door: ActionDoor, alert: str, instance: AlertInstance | None, changed: Callable[[], None]
) -> None:
    """`s`: the silence modal of `alert` (or of one of its instances), then its preview;
    `changed` is called once a silence is written."""
    status = door.statuses.get(alert)
    chosen = instance if instance is not None else silence_target(alert, status)

    # `alert` is the board's key (`eu/ALERT` with several contexts): the runner takes the
    # context from it; Alertmanager's `alertname` is the rule's name alone.
    name = split_key(alert)[1]

    def then(request: SilenceRequest | None) -> None:
        if request is not None:
            door.start(request.proposal, alert, done=_after(changed))

    door.app.push_screen(SilenceScreen(alert, prefill(name, status, chosen)), then)


def acknowledge(door: ActionDoor, alert: str, changed: Callable[[], None]) -> None:
    """`a`: acknowledge `alert` team-wide — its preview in the confirm modal, then Yes."""
    proposal = ack_proposal(split_key(alert)[1])  # the rule's name; the context from the key
    door.start(proposal, alert, done=_after(changed))
