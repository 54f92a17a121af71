"""`python -m oncall_drill.vllm_sim ...`: run one simulated vLLM server (see runner.py)."""

from __future__ import annotations

import sys

from oncall_drill.vllm_sim.runner import main

if __name__ == "__main__":
    sys.exit(main())
