"""`oncall serve`: the always-on, read-only Alertmanager webhook receiver (docs/architecture.md §1).

A front door beside `tui/`: it knows only `service/` and `model/`, and never imports
`remediation/` (an import-linter contract). Alertmanager's notification → each firing alert
with a runbook claimed in Redis by one replica → its checklist run in a bounded pool → the
verdict stored team-wide → a summary sent to the chat webhooks of the settings.
"""
