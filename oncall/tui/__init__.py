"""The terminal app (Textual): the only package that imports textual (docs/architecture.md §1)."""
