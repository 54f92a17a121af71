"""Rewrites docs/configuration-reference.md from the settings model (oncall.settings.reference).

Run it after changing a settings field; `make test` fails while the page is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from oncall.settings.reference import REFERENCE_PATH, render_reference


def main() -> int:
    target = Path(__file__).resolve().parent.parent / REFERENCE_PATH
    text = render_reference()
    if target.exists() and target.read_text(encoding="utf-8") == text:
        print(f"{REFERENCE_PATH}: up to date")
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"{REFERENCE_PATH}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
