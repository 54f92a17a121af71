"""One module per remediation, each exporting `ACTION` (see oncall/remediation/action.py)."""
