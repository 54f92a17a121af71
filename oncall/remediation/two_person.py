"""The two-person rule: an action named in `guards.two_person` runs only once a *different
authenticated* person approved it, while its requester is still there.

    oncall:approval:<action_id>        hash {requester, identity, action, target, target_json,
                                       params_json, preview, confirm_word, host, pid,
                                       proc_start, requested_at, expires_at}, TTL the timeout
    oncall:approval:<action_id>:alive  the requester's heartbeat, TTL HEARTBEAT_S, renewed by
                                       its `wait` at every poll
    oncall:approval-grant:<action_id>  the approval: JSON {approved_by, at}, SET NX by the
                                       approver, TTL what is left of the request's

Who may write what (docs/audit.md): the shipped ACL (deploy/redis/users.acl) lets requesters
(`oncall-operator`) write requests and only read grants, and approvers (`oncall-approver`,
`guards.approval_redis_url`) write grants and only read requests: a requester's credentials
cannot approve, and an approver's cannot change what was asked. The approver is shown the
preview recomputed from the live target (the executor's `approve`), never the stored one.

Who is a person: the requester and approver are `identity@host`, identity being the Kubernetes
username SelfSubjectReview gave (oncall/backends/identity.py) — never `$USER`. The same identity
on two hosts is still one person. An approver without an authenticated identity is refused.

A request dies with its requester: when the heartbeat has expired (the requesting process is
gone, or stuck), or the request names a process on this host that no longer runs (pid and its
start time, /proc/PID/stat field 22), approving it is refused.

`redis-cli HGETALL oncall:approval:<id>` shows a request.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oncall.backends.redis_write import RedisWriter
from oncall.errors import BackendError
from oncall.model.numbers import ascii_int
from oncall.model.write_path import GuardVerdict
from oncall.remediation.guards import APPROVAL_PREFIX, RedisGuard, _unavailable
from oncall.settings.durations import format_duration

#: How long a request outlives its requester's last poll (the requester renews it every poll).
HEARTBEAT_S = 5.0


def _person(actor: str) -> str:
    # Actors are "identity@host[/pid/…]": the same identity on two hosts is still one person.
    user, at, _host = actor.rpartition("@")
    return (user if at else actor).casefold()


def process_start(pid: int) -> str:
    """The start time of `pid` in clock ticks since boot (/proc/PID/stat field 22); "" if none.

    With the pid it names one process: a pid reused by a later process has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ")".
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def _requester_gone(request: dict[str, str]) -> str | None:
    """Why the requesting process is known to be gone (this host only), or None."""
    pid = ascii_int(request.get("pid", ""))
    if request.get("host") != socket.gethostname() or pid is None:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"the requesting process {pid} on {request['host']} has ended"
    except PermissionError:
        pass  # another account's process: it exists
    started = request.get("proc_start", "")
    if started and process_start(pid) not in ("", started):
        return f"the requesting process {pid} on {request['host']} has ended (pid reused)"
    return None


@dataclass(eq=False, repr=False, kw_only=True)
class TwoPersonRule(RedisGuard):
    """Actions named in `actions` need a second person's approval before they run.

    The requester stores a pending request under the action's id; another person (another
    authenticated identity, from any host) approves that id; the requester's `wait` polls until
    then, renewing its heartbeat.
    """

    guard = "two-person"

    actions: frozenset[str]
    timeout_s: float
    prefix: str = APPROVAL_PREFIX
    poll_s: float = 0.2
    #: Writes the grant: the approvers' Redis user (`guards.approval_redis_url`); None: `writer`.
    grant_writer: RedisWriter | None = None

    def key(self, action_id: str) -> str:
        return f"{self.prefix}:{action_id}"

    def grant_key(self, action_id: str) -> str:
        """Outside `prefix:*`, so the ACL can give requesters and approvers each their own."""
        return f"{self.prefix}-grant:{action_id}"

    async def _grant(self, action_id: str) -> dict[str, Any] | None:
        """The approval written for `action_id`, or None. ValueError when it is not ours."""
        raw = await self.client.get(self.grant_key(action_id))
        if raw is None:
            return None
        grant = json.loads(raw)
        if not isinstance(grant, dict) or not isinstance(grant.get("approved_by"), str):
            raise ValueError(f"{self.grant_key(action_id)} is not an approval")
        return grant

    def required(self, action: str) -> bool:
        """Whether policy requires a second person for this action."""
        return action in self.actions

    async def request(
        self, action_id: str, action: str, target: str, requester: str, **shown: str
    ) -> None:
        """Store a pending request, expiring after `timeout_s`. Raises BackendError.

        `shown`: what the approver is shown and checked against (preview, confirm_word,
        target_json); this process's host, pid and start time are added.
        """
        now = await self.now()
        pid = os.getpid()
        fields = {
            **shown,
            "requester": requester,
            "action": action,
            "target": target,
            "host": socket.gethostname(),
            "pid": str(pid),
            "proc_start": process_start(pid),
            "requested_at": repr(now),
            "expires_at": repr(now + self.timeout_s),
        }
        await self.writer.replace_hash(self.key(action_id), fields, expire_s=self.timeout_s)
        await self._beat(action_id)

    async def _beat(self, action_id: str) -> None:
        await self.writer.set(f"{self.key(action_id)}:alive", "1", expire_s=HEARTBEAT_S)

    def _missing(self, action_id: str) -> GuardVerdict:
        reason = f"no pending approval request {action_id} (never made, or expired)"
        return GuardVerdict(self.guard, False, reason, {"action_id": action_id})

    def _not_pending(
        self, action_id: str, request: dict[str, str], grant: dict[str, Any] | None, now: float
    ) -> GuardVerdict | None:
        """The refusal when `request` cannot be approved (any more); None when it can."""
        if not request:
            return self._missing(action_id)
        detail: dict[str, Any] = {"action_id": action_id, **request}
        detail.pop("preview", None)
        if grant is not None:
            reason = f"approval request {action_id} was already approved by {grant['approved_by']}"
            return GuardVerdict(self.guard, False, reason, detail)
        if now >= float(request.get("expires_at", "0")):
            reason = f"approval request {action_id} expired"
            return GuardVerdict(self.guard, False, reason, detail)
        return None

    async def pending(
        self, action_id: str, approver: str
    ) -> tuple[dict[str, str], GuardVerdict | None]:
        """The request `approver` may approve (to show its preview), or why they may not."""
        try:
            request = await self.client.hgetall(self.key(action_id))
            grant = await self._grant(action_id)
            refused = self._not_pending(action_id, request, grant, await self.now())
            if refused is not None:
                return request, refused
            detail: dict[str, Any] = {
                "action_id": action_id, "requester": request.get("requester"), "approver": approver,
            }  # fmt: skip
            gone = _requester_gone(request)
            if gone is None and await self.client.get(f"{self.key(action_id)}:alive") is None:
                gone = f"the requester stopped waiting (no heartbeat for {HEARTBEAT_S:g}s)"
            if gone:
                return request, GuardVerdict(self.guard, False, f"the request died: {gone}", detail)
            if _person(approver) == _person(request.get("requester", "")):
                reason = f"self-approval is refused: {request['requester']} requested this action"
                return request, GuardVerdict(self.guard, False, reason, detail)
        except (BackendError, KeyError, ValueError) as exc:
            return {}, self._broken(exc)
        return request, None

    async def approve(self, action_id: str, approver: str) -> GuardVerdict:
        """Approve a pending request as `approver`; refused for the requester themself, and
        once the requester is gone."""
        key = self.key(action_id)
        request, refused = await self.pending(action_id, approver)
        if refused is not None:
            return refused
        try:
            now = await self.now()
            grant = json.dumps({"approved_by": approver, "at": now})
            left = float(request["expires_at"]) - now
            writer = self.grant_writer or self.writer
            if not await writer.set_nx(self.grant_key(action_id), grant, expire_s=max(left, 1)):
                # Another approver was first (between our read and this write).
                request = await self.client.hgetall(key)
                return self._not_pending(
                    action_id, request, await self._grant(action_id), now
                ) or self._missing(action_id)
        except BackendError as exc:
            if "NOPERM" in str(exc):
                reason = (
                    f"this Redis user may not write approvals ({exc}): an approval is written "
                    "with the approvers' credentials, guards.approval_redis_url "
                    "(deploy/redis/users.acl: oncall-approver)"
                )
                return GuardVerdict(self.guard, False, reason, {"action_id": action_id})
            return self._broken(exc)
        except (KeyError, ValueError) as exc:
            return self._broken(exc)
        detail: dict[str, Any] = {
            "action_id": action_id, "requester": request.get("requester"), "approver": approver,
        }  # fmt: skip
        reason = f"{request['action']} on {request['target']} approved by {approver}"
        return GuardVerdict(self.guard, True, reason, detail)

    async def wait(self, action_id: str, *, timeout_s: float | None = None) -> GuardVerdict:
        """Poll (every `poll_s`, renewing the heartbeat) until the request is approved, or
        refuse after `timeout_s`.

        The bound is on the event loop's monotonic clock; one poll is itself bounded by the
        Redis timeout. On timeout the request is withdrawn, so a late approval cannot count.
        """
        limit = self.timeout_s if timeout_s is None else timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        key = self.key(action_id)
        try:
            while True:
                request = await self.client.hgetall(key)
                grant = await self._grant(action_id)
                if not request:
                    return self._missing(action_id)
                if grant is not None:
                    approver = grant["approved_by"]
                    detail = {"action_id": action_id, "requester": request.get("requester"),
                              "approver": approver}  # fmt: skip
                    if _person(approver) == _person(request.get("requester", "")):
                        # Written by hand with the approvers' credentials: not a second person.
                        reason = f"a self-approval ({approver}) was written: refused"
                        return GuardVerdict(self.guard, False, reason, detail)
                    return GuardVerdict(self.guard, True, f"approved by {approver}", detail)
                lifetime = float(request["expires_at"]) - float(request["requested_at"])
                expired = await self.now() >= float(request["expires_at"])
                left = deadline - loop.time()
                if expired or left <= 0:
                    break
                await self._beat(action_id)
                await asyncio.sleep(min(self.poll_s, left))
            await self.writer.delete(key)
        except (BackendError, KeyError, ValueError) as exc:
            return self._broken(exc)
        reason = f"no second person approved within {format_duration(limit)}"
        if expired:
            reason = (
                f"no second person approved within {format_duration(lifetime)} (request expired)"
            )
        detail = {"action_id": action_id, "requester": request.get("requester")}
        return GuardVerdict(self.guard, False, reason, detail)

    def _broken(self, exc: Exception) -> GuardVerdict:
        if isinstance(exc, BackendError):
            return _unavailable(self.guard, exc)
        # A request whose fields are missing or do not parse was not written by us: refuse it.
        reason = f"approval request unreadable: {type(exc).__name__} {exc}"
        return GuardVerdict(self.guard, False, reason, {})
