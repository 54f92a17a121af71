"""`/metrics` of `oncall serve` (prometheus_client), one registry per server (tests run several).

Names are `oncall_serve_*`; the `platform` pack's rule for oncall's own health reads them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: Seconds: checklists take from tens of milliseconds to a slow step's timeout.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class ServeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.notifications = Counter(
            "oncall_serve_notifications", "Webhook notifications received, by outcome "
            "(accepted, or the reason it was rejected).", ["outcome"], registry=r,
        )  # fmt: skip
        self.alerts = Counter(
            "oncall_serve_alerts", "Alert instances received, by what was done with them.",
            ["outcome"], registry=r,
        )  # fmt: skip
        self.checklists = Counter(
            "oncall_serve_checklists", "Firings by outcome: checked, duplicate, claimed "
            "elsewhere, overflowed, no runbook, runbook broken, error.", ["outcome"], registry=r,
        )  # fmt: skip
        self.duration = Histogram(
            "oncall_serve_checklist_duration_seconds", "Time a checklist ran.",
            buckets=BUCKETS, registry=r,
        )  # fmt: skip
        self.receive_to_stored = Histogram(
            "oncall_serve_receive_to_stored_seconds",
            "From the notification's receipt to its verdict stored.", buckets=BUCKETS,
            registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge(
            "oncall_serve_queue_depth", "Firings waiting for a worker.", registry=r
        )
        self.store_errors = Counter(
            "oncall_serve_verdict_store_errors", "Verdict writes and reads Redis refused or "
            "did not answer (a buffered verdict is written later).", registry=r,
        )  # fmt: skip
        self.buffered = Gauge(
            "oncall_serve_verdicts_buffered", "Verdicts in memory waiting for Redis.", registry=r
        )
        self.dropped = Counter(
            "oncall_serve_verdicts_dropped", "Verdicts lost: the memory buffer was full.",
            registry=r,
        )  # fmt: skip
        self.notify = Counter(
            "oncall_serve_notify", "Notification webhook sends by target and outcome.",
            ["target", "outcome"], registry=r,
        )  # fmt: skip
