"""The one facade the TUI and every headless command use (docs/architecture.md §1)."""
