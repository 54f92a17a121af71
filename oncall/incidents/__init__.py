"""Incidents (docs/architecture.md §3): alert instances one cause is behind, their timeline
and the postmortem draft built from the evidence and the audit chain."""
