"""`python -m oncall.drill.gpu_sim ...`: run one simulated GPU exporter (see runner.py)."""

from __future__ import annotations

import sys

from oncall.drill.gpu_sim.runner import main

if __name__ == "__main__":
    sys.exit(main())
