"""Thin async clients of the outside world: Prometheus, Redis (and later Kubernetes, GPU, vLLM).

Every call has a timeout and fails with `oncall.errors.BackendError` carrying a short reason.
Reading and writing are separate modules: only `remediation/` may import a `*_write` module
(import-linter contract), so a read path cannot change the world by accident.
"""

import sys

# httpx's package imports its own command line (`httpx._main`: rich and click, ~0.1 s of CPU)
# whenever those are installed, and textual installs rich. oncall never runs that CLI (the
# `httpx` console script is a process of its own), so a headless `oncall check` should not
# pay for it: a None entry makes that import fail, and httpx then defines a stub `main`.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
