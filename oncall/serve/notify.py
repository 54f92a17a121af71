"""Send each verdict's summary to the notification webhooks of `serve.notify`.

Two formats: `slack` (an incoming webhook's `text` + `blocks`; Mattermost and Rocket.Chat
accept the same JSON) and `json` (the summary as an object, for anything else). Sends run on
their own tasks from a bounded queue: a slow or dead receiver never holds a checklist; each
send is tried `1 + retries` times, each attempt bounded by its timeout; every outcome is
counted (`oncall_serve_notify_total`), a full queue drops and counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import httpx

from oncall.model.verdicts import (
    Verdict,
    failing_steps,
    open_command,
    summary_lines,
    verdict_findings,
)
from oncall.redaction import redact, register_secret
from oncall.serve.metrics import ServeMetrics
from oncall.settings.serve import NotifySettings

log = logging.getLogger("oncall.serve")
#: Summaries waiting to be sent, all targets together.
QUEUE = 256


def _said(step: Verdict) -> str:
    return str(step.get("summary") or step.get("reason") or "")


def slack_body(verdict: Verdict) -> dict[str, Any]:
    lines = summary_lines(verdict)
    text = "\n".join(lines)
    fields = [
        {
            "type": "mrkdwn",
            "text": f"*{s.get('id')}* ({s.get('status')}): {_said(s)}",
        }
        for s in failing_steps(verdict)[:10]  # Slack: at most 10 fields a section
    ]
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {
                "type": "plain_text",
                "text": f"{verdict.get('alert')}: {verdict_findings(verdict)}"[:150],
            },
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": lines[0][:3000]}},
    ]
    if fields:
        blocks.append({"type": "section", "fields": fields})
    proposals = [p.get("text", "") for p in verdict.get("proposals") or []]
    if proposals:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": ("proposed: " + "; ".join(proposals))[:3000]},
            }
        )
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"open: `{open_command(verdict)}`"}],
        }
    )
    return {"text": text, "blocks": blocks}


def json_body(verdict: Verdict) -> dict[str, Any]:
    return {
        "alert": verdict.get("alert"),
        "context": verdict.get("context"),
        "starts_at": verdict.get("starts_at"),
        "labels": verdict.get("labels"),
        "verdict": verdict.get("id"),
        "findings": verdict_findings(verdict),
        "failing_steps": [
            {
                "id": s.get("id"),
                "status": s.get("status"),
                "summary": s.get("summary") or s.get("reason"),
            }
            for s in failing_steps(verdict)
        ],
        "proposals": [p.get("text") for p in verdict.get("proposals") or []],
        "open": open_command(verdict),
        "text": "\n".join(summary_lines(verdict)),
    }


class Notifier:
    """A bounded queue of summaries and one sender task per target."""

    def __init__(self, targets: list[NotifySettings], metrics: ServeMetrics) -> None:
        self.targets = targets
        self.metrics = metrics
        self._queues = [asyncio.Queue[Verdict](QUEUE) for _ in targets]
        self._tasks: list[asyncio.Task[None]] = []
        self._client: httpx.AsyncClient | None = None
        for target in targets:
            register_secret(target.url.get_secret_value())

    def start(self) -> None:
        if not self.targets:
            return
        self._client = httpx.AsyncClient(follow_redirects=False)
        self._tasks = [
            asyncio.create_task(self._sender(t, q), name=f"notify-{t.name}")
            for t, q in zip(self.targets, self._queues, strict=True)
        ]

    def submit(self, verdict: Verdict) -> None:
        for target, queue in zip(self.targets, self._queues, strict=True):
            try:
                queue.put_nowait(verdict)
            except asyncio.QueueFull:
                self.metrics.notify.labels(target.name, "dropped").inc()
                log.warning(
                    "notify %s: queue full, summary of %s dropped", target.name, verdict.get("id")
                )

    async def _sender(self, target: NotifySettings, queue: asyncio.Queue[Verdict]) -> None:
        while True:
            verdict = await queue.get()
            outcome = await self._send(target, verdict)
            self.metrics.notify.labels(target.name, outcome).inc()

    async def _send(self, target: NotifySettings, verdict: Verdict) -> str:
        assert self._client is not None
        body = slack_body(verdict) if target.format == "slack" else json_body(verdict)
        url = target.url.get_secret_value()
        for attempt in range(1 + target.retries):
            try:
                answer = await self._client.post(url, json=body, timeout=target.timeout)
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if answer.is_success:
                    return "sent"
                problem = f"HTTP {answer.status_code}"
                if answer.status_code < 500 and answer.status_code != 429:
                    break  # the receiver refuses it: trying again changes nothing
            log.warning(
                "notify %s: attempt %d failed: %s", target.name, attempt + 1, redact(problem)
            )
            if attempt < target.retries:
                await asyncio.sleep(0.5 * 2**attempt)  # 0.5 s, 1 s, … between attempts
        return "failed"

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._client is not None:
            await self._client.aclose()
