"""`python -m oncall_drill.gateway_sim ...`: run one simulated AI gateway (see runner.py)."""

from __future__ import annotations

import sys

from oncall_drill.gateway_sim.runner import main

if __name__ == "__main__":
    sys.exit(main())
