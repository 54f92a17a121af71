"""Plain value types shared by every layer; no I/O here."""
