"""silence: an Alertmanager silence on some label matchers, for a while (amtool silence add).

Plan: the matchers (Prometheus syntax, as `oncall alerts --match` reads them), the time from
now to now + duration, the comment, the author — the operator's identity (the Kubernetes
username SelfSubjectReview gives, else the OS account of the real uid; never `$USER`) — and
**every alert the silence would match now**. Alertmanager itself selects them
(`GET /api/v2/alerts?filter=…`), not a local match: it holds alerts from every Prometheus that
sends to it (not only the rules oncall loads), and it matches with its own RE2, so what the
preview lists is what the silence will mute. A silence that matches no alert now is flagged
(it may be meant for an alert yet to come; it may be a typo).

Matchers that match everything are refused when planned, with Alertmanager's own rule (amtool
refuses them too): at least one matcher must not match the empty string — so `{}`,
`alertname=~".*"` or `pod!="x"` alone never silence the whole team's pager.

A broad or long silence is dangerous (docs/audit.md: a 30-day `{alertname=~".+"}` took
only "yes"): one with no `name="value"` matcher (every matcher a regex or a negation), or that
matches BROAD_ALERTS alerts or more now, or that lasts longer than LONG_S, is confirmed by
typing `silence-DURATION` (e.g. `silence-30d`), and the preview says why.

Before the write, the alerts are matched again: an alert the silence would now mute that the
person was not shown refuses the action (precondition). The silence's times are taken when it
is created (now → now + duration), so a slow confirmation does not shorten it.

No Kubernetes Lease is taken (`Action.unleased`): the write goes to Alertmanager alone, which
has no compare-and-set for silences and needs none here — two people silencing the same alerts
at once make two silences, each with its own author, both shown and each expirable, and the
alerts stay muted either way (amtool takes no lock either). What the Lease would have guarded,
that the person is not muting more than they saw, is the re-match above, against Alertmanager
itself. So silencing works with no kubeconfig, or with the Kubernetes API down; the author is
then the OS account (still never `$USER`).

Command-line equivalents: `amtool silence add MATCHERS --duration 2h --comment …`, then
`amtool silence query -q ID`.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from oncall.backends.alertmanager_write import api_matcher
from oncall.backends.identity import os_account
from oncall.errors import OncallError
from oncall.model.action_params import SilenceParams
from oncall.model.alertmanager import AmAlert
from oncall.model.matchers import Matcher, MatcherError, parse_selection
from oncall.model.write_path import Plan, Precondition, Target
from oncall.remediation.action import Action, PlanError, Say
from oncall.remediation.clients import Clients

#: The precondition: the fingerprints of the alerts the person was shown.
MATCHED = "matched alerts"
#: The preview lists at most this many matched alerts, then how many more.
SHOWN_ALERTS = 20
MAX_DURATION_S = 30 * 86400
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(?:[0-9]+[mhdw])+")
SEEN_TIMEOUT_S = 10.0
#: A silence longer than this, or matching this many alerts, is typed for, not just "yes".
LONG_S = 86400
BROAD_ALERTS = 10


def why_dangerous(matchers: tuple[Matcher, ...], seconds: int, found: int) -> list[str]:
    """Why a silence must be typed for (empty: "yes" will do)."""
    why = []
    if not any(m.op == "=" and m.value for m in matchers):
        why.append('no matcher names one value (name="value"): it mutes alerts yet unknown')
    if found >= BROAD_ALERTS:
        why.append(f"it matches {found} alerts now")
    if seconds > LONG_S:
        why.append(f"it lasts {seconds // 3600}h, longer than {LONG_S // 3600}h")
    return why


def duration_s(text: str) -> int:
    """'2h' → 7200, '1h30m' → 5400; whole minutes to 30 days."""
    value = text.strip()
    if not _DURATION.fullmatch(value):
        raise PlanError(f"silence duration {text!r}: write it as 30m, 2h, 1d or 1h30m")
    seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)([mhdw])", value))
    if not 60 <= seconds <= MAX_DURATION_S:
        raise PlanError(f"silence duration {text!r}: from 1m to 30d")
    return seconds


def silence_matchers(text: str) -> tuple[Matcher, ...]:
    """The matchers of a silence, or PlanError: unreadable, none, or matching everything."""
    try:
        found = parse_selection(text, words=False).matchers
    except MatcherError as exc:
        raise PlanError(f"silence matchers {text!r}: {exc}") from exc
    if not found:
        raise PlanError('a silence needs label matchers, e.g. {alertname="X", pod="vllm-0"}')
    if all(m.matches({}) for m in found):
        raise PlanError(
            f"silence matchers {text!r} match every alert: at least one matcher must not "
            'match the empty string (Alertmanager\'s rule), e.g. alertname="X"'
        )
    return found


async def operator_name(clients: Clients) -> str:
    """Who is silencing: the Kubernetes username, else the OS account (never `$USER`)."""
    try:
        return (await clients.identity()).username
    except OncallError:
        return str(os_account()["os_user"])


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def alert_line(alert: AmAlert) -> str:
    """'{alertname="X", pod="vllm-0"} active' (the state Alertmanager gives it)."""
    pairs = ", ".join(f'{k}="{v}"' for k, v in sorted(alert.labels.items()))
    return f"{{{pairs}}} {alert.state}"


async def matched(clients: Clients, matchers: tuple[Matcher, ...]) -> list[AmAlert]:
    """The alerts Alertmanager selects with `matchers` now (silenced and inhibited too)."""
    async with clients.alertmanager_writer() as am:
        return await am.alerts(matchers=[str(m) for m in matchers])


class Silence(Action[SilenceParams]):
    name = "silence"
    params = SilenceParams
    unleased = (
        "Alertmanager only; the alerts it matches are asked again just before the write, and a "
        "second silence of the same alerts is a harmless duplicate (amtool takes no lock either)"
    )

    async def plan(self, params: SilenceParams, clients: Clients) -> Plan:
        matchers = silence_matchers(params.matchers)
        seconds = duration_s(params.duration)
        if not params.comment:
            raise PlanError("a silence needs a comment: why, for everyone who sees it")
        author = await operator_name(clients)
        found = await matched(clients, matchers)
        starts = datetime.now(UTC)
        ends = starts + timedelta(seconds=seconds)
        shown = "{" + ", ".join(map(str, matchers)) + "}"
        body = {
            "matchers": [api_matcher(m) for m in matchers],
            "startsAt": iso(starts),
            "endsAt": iso(ends),
            "createdBy": author,
            "comment": params.comment,
        }
        lines = [alert_line(a) for a in found[:SHOWN_ALERTS]]
        if len(found) > SHOWN_ALERTS:
            lines.append(f"… {len(found) - SHOWN_ALERTS} more")
        flag = "" if found else "; WARNING: matches NO alert now (check the matchers)"
        dangerous = why_dangerous(matchers, seconds, len(found))
        return Plan(
            action=self.name,
            params=params.model_dump(),
            target=Target("Silence", shown),
            before=f"{len(found)} alert{'s' if len(found) != 1 else ''} match now{flag}",
            after=(
                f"silenced {shown} from {iso(starts)} to {iso(ends)} ({params.duration}) by "
                f"{author}: {params.comment}"
            ),
            request={"method": "POST", "path": "/api/v2/silences", "body": body},
            dangerous=bool(dangerous),
            confirm_word=f"silence-{params.duration.strip()}" if dangerous else "yes",
            notes=tuple(f"typed confirmation: {why}" for why in dangerous)
            + (
                tuple(f"matches {line}" for line in lines)
                or ("matches no alert now: the silence waits for one",)
            ),
            preconditions=(Precondition(MATCHED, sorted(a.fingerprint for a in found)),),
        )

    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        """Alertmanager has no dry run for silences: the alerts it would match, asked again."""
        found = await matched(clients, silence_matchers(plan.params["matchers"]))
        return {
            "matches": len(found),
            "alerts": [alert_line(a) for a in found[:SHOWN_ALERTS]],
            **({} if found else {"warning": "the silence matches no alert now"}),
        }

    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        shown = _shown_fingerprints(plan)
        now = await matched(clients, silence_matchers(plan.params["matchers"]))
        new = [a for a in now if a.fingerprint not in shown]
        if new:
            return (
                f"the silence would now also mute {len(new)} alert(s) not in the preview: "
                + "; ".join(alert_line(a) for a in new[:3])
            )
        return None

    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        starts = datetime.now(UTC)
        ends = starts + timedelta(seconds=duration_s(plan.params["duration"]))
        body = {**plan.request["body"], "startsAt": iso(starts), "endsAt": iso(ends)}
        async with clients.alertmanager_writer() as am:
            silence_id = await am.create_silence(body)
        return {"silence_id": silence_id, "startsAt": body["startsAt"], "endsAt": body["endsAt"]}

    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        silence_id = str(result["silence_id"])
        selected = silence_matchers(plan.params["matchers"])
        async with clients.alertmanager_writer() as am:
            silence = await am.silence(silence_id)
            state = silence["status"].get("state")
            if state not in ("active", "pending"):
                return False, f"silence {silence_id} is {state}, not active"
            until = f"silence {silence_id} {state} until {silence.get('endsAt')}"
            say(f"{until}; waiting for Alertmanager to mark its alerts silenced")
            deadline = time.monotonic() + SEEN_TIMEOUT_S
            while True:  # bounded by the deadline: Alertmanager marks alerts when they are read
                alerts = await am.alerts(matchers=[str(m) for m in selected])
                muted = [a for a in alerts if silence_id in a.silenced_by]
                if len(muted) == len(alerts):
                    return True, f"{until}; {len(muted)} alert(s) silenced by it"
                if time.monotonic() >= deadline:
                    return False, f"{until}, but {len(alerts) - len(muted)} alert(s) not silenced"
                await asyncio.sleep(0.5)


def _shown_fingerprints(plan: Plan) -> set[str]:
    seen = plan.expected(MATCHED)
    return set(seen.expected or ()) if seen is not None else set()


ACTION = Silence()
