"""Thin async clients of the outside world: Prometheus, Redis (and later Kubernetes, GPU, vLLM).

Every call has a timeout and fails with `oncall.errors.BackendError` carrying a short reason.
Reading and writing are separate modules: only `remediation/` may import a `*_write` module
(import-linter contract), so a read path cannot change the world by accident.
"""
