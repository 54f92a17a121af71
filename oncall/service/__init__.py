"""The one facade the TUI and every headless command use (DESIGN §3)."""
