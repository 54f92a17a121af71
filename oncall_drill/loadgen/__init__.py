"""Bounded load generator for the drill: the source articles' request mix at a rate curve.

Importable API: `await run_load(LoadConfig(url=..., rate=..., duration_s=..., max_requests=...))`
→ `Summary` (`.to_dict()` for JSON). Command line:
`python -m oncall_drill.loadgen --url http://127.0.0.1:G --rate R --duration S --max-requests N
[--curve constant|ramp|spike] [--seed K]`. Loopback targets only; hard caps on requests,
seconds and concurrency (see runner.py).
"""

from oncall_drill.loadgen.mix import KINDS, MIX, MixGenerator, Scenario, Turn
from oncall_drill.loadgen.runner import (
    MAX_DURATION_S,
    MAX_IN_FLIGHT,
    MAX_REQUESTS,
    LoadConfig,
    Summary,
    run_load,
)
from oncall_drill.loadgen.targets import NotLoopbackError, require_loopback_url

__all__ = [
    "KINDS",
    "MAX_DURATION_S",
    "MAX_IN_FLIGHT",
    "MAX_REQUESTS",
    "MIX",
    "LoadConfig",
    "MixGenerator",
    "NotLoopbackError",
    "Scenario",
    "Summary",
    "Turn",
    "require_loopback_url",
    "run_load",
]
