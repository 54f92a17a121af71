"""The terminal app (Textual): the only package that imports textual (DESIGN §3)."""
