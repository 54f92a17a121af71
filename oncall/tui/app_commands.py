"""What the app does for the person at the keyboard beyond the board: help, the `:` prompt and
its commands (`:alerts`, `:audit`, `:incidents`, `:context NAME`), the `keys` setting, and the
silences and acks a screen asks for by message (`SilenceAlert`, `AcknowledgeAlert`).

`OncallApp` (oncall.tui.app) is built on `ScreenActions`; these need only the settings, the
board and its book, the clock, the audit source and the remediation runner, and import the
screens (and the remediation door) they open when first opened: the first frame shows only
the board.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.app import App

from oncall.settings import Settings
from oncall.tui import contexts_view
from oncall.tui.board import BoardScreen
from oncall.tui.messages import AcknowledgeAlert, RefreshAlerts, SilenceAlert
from oncall.tui.state import AlertBook

if TYPE_CHECKING:
    from oncall.service.audit_view import AuditSource
    from oncall.service.incident_view import IncidentSource
    from oncall.service.remediation import RemediationRunner
    from oncall.tui.acting import ActionDoor


class ScreenActions(App[None]):
    """The app's screen switching and `:` commands (the app's state is `OncallApp`'s)."""

    settings: Settings
    board: BoardScreen
    book: AlertBook
    clock: Callable[[], float]
    keymap: dict[str, str]
    _audit_source: AuditSource | None
    _remediation_runner: RemediationRunner | None
    #: The incidents' reader (`IncidentView`), made on the first `:incidents`; tests set it.
    _incident_source: IncidentSource | None = None

    @property
    def audit_source(self) -> AuditSource:
        if self._audit_source is None:
            from oncall.service.audit_view import LiveAudit

            self._audit_source = LiveAudit(self.settings)
        return self._audit_source

    @property
    def incident_source(self) -> IncidentSource:
        if self._incident_source is None:
            from oncall.service.incident_view import IncidentView

            self._incident_source = IncidentView(self.settings)
        return self._incident_source

    @property
    def remediation_runner(self) -> RemediationRunner:
        if self._remediation_runner is None:
            from oncall.service.contexts import live_remediations

            self._remediation_runner = live_remediations(
                self.settings, read_only_flag=self.settings.read_only
            )
        return self._remediation_runner

    @property
    def actions(self) -> ActionDoor:
        """The door every action started in this app goes through (oncall.tui.acting)."""
        from oncall.tui.acting import ActionDoor

        return ActionDoor(self, lambda: self.remediation_runner, self.book.statuses)

    def on_silence_alert(self, message: SilenceAlert) -> None:
        from oncall.tui.silence import open_silence

        open_silence(self.actions, message.alert, message.instance, self._refresh_now)

    def on_acknowledge_alert(self, message: AcknowledgeAlert) -> None:
        from oncall.tui.silence import acknowledge

        acknowledge(self.actions, message.alert, self._refresh_now)

    def _refresh_now(self) -> None:
        """Alert states now: the board shows a silence or an ack just written at once."""
        self.post_message(RefreshAlerts())

    def action_help(self) -> None:
        from oncall.tui.help import HelpScreen

        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        title = getattr(screen, "HELP_TITLE", "board")
        self.push_screen(HelpScreen(title, screen.BINDINGS, self.BINDINGS, self.keymap))

    # -- `:` commands, the palette and the keymap (oncall.tui.commands) ------------------------

    def apply_keymap(self) -> None:
        """The `keys` setting over the bindings' default keys; unknown ids are reported."""
        if not self.settings.keys:
            return  # finding every binding imports every screen: not for nothing
        from oncall.tui.commands import (
            binding_ids,
            oncall_binding_owners,
            split_keymap,
            unknown_keys_text,
        )

        known = binding_ids([type(self), *oncall_binding_owners()])
        keymap, unknown = split_keymap(self.settings.keys, known)
        if keymap:
            self.keymap = keymap
            self.set_keymap(keymap)
        if unknown:
            self.notify(unknown_keys_text(unknown), severity="warning", timeout=15)

    def action_command_line(self) -> None:
        from oncall.tui.commands import CommandLineScreen

        if not isinstance(self.screen, CommandLineScreen):
            suggestions = contexts_view.command_suggestions(self.settings)
            self.push_screen(CommandLineScreen(suggestions), self.run_command)

    async def run_command(self, text: str | None) -> None:
        """Run a `:` command as typed; an unknown one says so and changes nothing."""
        if not text:
            return
        from oncall.tui.commands import parse_command, unknown_command

        command, argument = parse_command(text)
        if command is None:
            self.notify(unknown_command(text), severity="error")
            return
        if argument:  # `:context NAME`, the one command that takes one
            self.show_context_view(argument)
            return
        await self.run_action(command.action)

    def show_context_view(self, argument: str) -> None:
        """`:context NAME` — the board of that context only; `:context all` every one."""
        try:
            view = contexts_view.parse_view(self.settings, argument)
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        self.action_show_alerts()
        self.board.set_view(view)

    def action_show_alerts(self) -> None:
        """`:alerts` — back to the board, whatever is on top of it."""
        while self.screen is not self.board and len(self.screen_stack) > 1:
            self.pop_screen()

    def action_show_audit(self) -> None:
        """`:audit` — the audit screen, over the board (as k9s switches views)."""
        from oncall.tui.audit_screen import AuditScreen

        self.action_show_alerts()
        self.push_screen(AuditScreen(self.settings, self.audit_source, self.clock))

    def action_show_incidents(self) -> None:
        """`:incidents` — the team's incidents over the board; enter opens a timeline."""
        from oncall.tui.incidents_screen import IncidentsScreen

        self.action_show_alerts()
        self.push_screen(IncidentsScreen(self.settings, self.incident_source))

    def action_show_context(self) -> None:
        from oncall.tui.commands import ContextScreen

        if not isinstance(self.screen, ContextScreen):
            view = self.board.view
            settings = self.settings if view is None else self.settings.for_context(view)
            self.push_screen(ContextScreen(settings))
