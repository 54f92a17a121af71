"""`python -m oncall_drill.gpu_sim ...`: run one simulated GPU exporter (see runner.py)."""

from __future__ import annotations

import sys

from oncall_drill.gpu_sim.runner import main

if __name__ == "__main__":
    sys.exit(main())
