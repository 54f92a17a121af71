"""oncall: the on-call engineer's terminal for LLM inference services.

Golden alerts live from Prometheus, root-cause checklists that run the moment an alert is
opened, human-confirmed remediations, and a tamper-evident audit log. See docs/architecture.md
for the layers; this top-level module stays import-free so that `oncall --help` starts fast.
"""

__version__ = "0.1.0"
