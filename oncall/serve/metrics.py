"""`/metrics` of `oncall serve` (prometheus_client), one registry per server (tests run several).

Names are `oncall_serve_*`; the `platform` pack's rule for oncall's own health reads them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: Seconds: checklists take from tens of milliseconds to a slow step's timeout.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class ServeMetrics:
    """Every metric of one server, in its own registry."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(f"oncall_serve_{name}", doc, labels, registry=r)

        def histogram(name: str, doc: str) -> Histogram:
            return Histogram(f"oncall_serve_{name}", doc, buckets=BUCKETS, registry=r)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"oncall_serve_{name}", doc, registry=r)

        self.notifications = counter(
            "notifications",
            "Webhook notifications received, by outcome (accepted, or the reason it was rejected).",
            "outcome",
        )
        self.alerts = counter(
            "alerts", "Alert instances received, by what was done with them.", "outcome"
        )
        self.checklists = counter(
            "checklists",
            "Firings by outcome: checked, duplicate, claimed elsewhere, overflowed, no runbook, "
            "runbook broken, error.",
            "outcome",
        )
        self.duration = histogram("checklist_duration_seconds", "Time a checklist ran.")
        self.receive_to_stored = histogram(
            "receive_to_stored_seconds", "From the notification's receipt to its verdict stored."
        )
        self.queue_depth = gauge("queue_depth", "Firings waiting for a worker.")
        self.store_errors = counter(
            "verdict_store_errors",
            "Verdict writes and reads Redis refused or did not answer (a buffered verdict is "
            "written later).",
        )
        self.buffered = gauge("verdicts_buffered", "Verdicts in memory waiting for Redis.")
        self.dropped = counter("verdicts_dropped", "Verdicts lost: the memory buffer was full.")
        self.notify = counter(
            "notify", "Notification webhook sends by target and outcome.", "target", "outcome"
        )
