"""The audit screen, driven with Pilot: against a fake `AuditSource`, and against a real log on
disk that is then tampered with. Snapshots at 100x30 and 80x24 from fixed records."""

from __future__ import annotations

import gc
import json
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from oncall.audit.log import AuditLog
from oncall.audit.records import Record
from oncall.service.audit_view import (
    AuditPage,
    AuditQuery,
    ChainStatus,
    LiveAudit,
    parse_query,
    row_of,
)
from oncall.settings import Settings
from oncall.tui.app import OncallApp
from oncall.tui.audit_screen import AuditScreen
from oncall.tui.board import BoardScreen
from tests.harness.waiting import until
from tests.tui.fakes import FakeAlerts, FakeChecklists, FakeClock, board_statuses
from tests.tui.snapshot_sizes import SIZES, Compare

PATH = "/var/lib/oncall/audit.jsonl"
ACTION = "3f9a1c2e7b10"


def record(seq: int, transition: str, action: str, target: dict[str, str], **more: Any) -> Record:
    """A record as the log writes it, at a fixed time (00:0<seq> on 2026-01-01)."""
    return {
        "seq": seq,
        "id": f"{seq:06d}-0000abcd",
        "ts": f"2026-01-01T00:{seq:02d}:00.000Z",
        "action_id": more.pop("action_id", ACTION),
        "transition": transition,
        "action": action,
        "target": target,
        "actor": {"user": more.pop("user", "alice"), "host": "oncall-1", "ssh_client": None},
        "alert": {"name": "LLMHighP99Latency", "value": 1.84},
        "evidence": None,
        "request": None,
        "dry_run": None,
        "outcome": None,
        "guard": None,
        "duration_s": None,
        "detail": {},
        **more,
        "prev": "0" * 64,
        "hash": f"{seq:064x}",
    }


DEPLOYMENT = {"kind": "Deployment", "namespace": "ai", "name": "vllm"}
POD = {"kind": "Pod", "namespace": "ai", "name": "vllm-7d9c-0"}


def fixed_records() -> list[Record]:
    """One lowered max-num-seqs from proposal to verification, a refused and an unfinished
    pod rebuild; oldest first, as in the file."""
    seqs = "set-max-num-seqs"
    return [
        record(1, "proposed", seqs, DEPLOYMENT, request={"value": 64}),
        record(2, "approved", seqs, DEPLOYMENT),
        record(3, "started", seqs, DEPLOYMENT),
        record(4, "succeeded", seqs, DEPLOYMENT, outcome="succeeded", duration_s=41.2),
        record(5, "verified", seqs, DEPLOYMENT),
        record(6, "refused", "rebuild-pod", POD, user="bob", action_id="b", guard="rate limit"),
        record(7, "started", "rebuild-pod", POD, user="bob", action_id="c"),
    ]


INTACT = ChainStatus(
    path=PATH,
    exists=True,
    ok=True,
    count=7,
    incomplete=(
        "action c: rebuild-pod vllm-7d9c-0 started at 2026-01-01T00:07:00.000Z by bob@oncall-1 "
        "(record 7), no outcome recorded (the process died?)",
    ),
)
BROKEN = ChainStatus(
    path=PATH,
    exists=True,
    ok=False,
    count=7,
    where="record 4",
    problem="hash does not match its content — edited",
)


@dataclass
class FakeAudit:
    """Fixed records and a fixed verification; `calls` counts what the screen asked for."""

    entries: list[Record] = field(default_factory=fixed_records)
    chain: ChainStatus = INTACT
    error: Exception | None = None
    calls: list[str] = field(default_factory=list)

    async def records(self, query: AuditQuery) -> AuditPage:
        self.calls.append("records")
        if self.error is not None:
            raise self.error
        numbered = list(enumerate(self.entries, start=1))[::-1]
        matched = [row_of(i, r) for i, r in numbered if query.matches(r)]
        return AuditPage(PATH, True, tuple(matched), len(matched), len(numbered))

    async def details(self, key: str) -> str | None:
        self.calls.append(f"details {key}")
        found = next((r for r in self.entries if r["id"] == key), None)
        return None if found is None else json.dumps(found, indent=2)

    async def verify(self) -> ChainStatus:
        self.calls.append("verify")
        if self.error is not None:
            raise self.error
        return self.chain


def audit_app(
    audit: Any, clock: FakeClock | None = None, settings: Settings | None = None
) -> OncallApp:
    return OncallApp(
        settings or Settings(),
        alerts_source=FakeAlerts(board_statuses()),
        checklist_runner=FakeChecklists(),
        audit_source=audit,
        clock=clock or FakeClock(),
    )


def audit_screen(app: OncallApp) -> AuditScreen:
    screen = app.screen
    assert isinstance(screen, AuditScreen), screen
    return screen


def table_rows(screen: AuditScreen) -> list[list[str]]:
    table: DataTable[Text] = screen.query_one("#audit-records", DataTable)
    return [[cell.plain for cell in table.get_row_at(i)] for i in range(table.row_count)]


def text_of(screen: AuditScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def open_audit(pilot: Pilot[Any]) -> AuditScreen:
    app = pilot.app
    assert isinstance(app, OncallApp)
    await pilot.press("colon", *"audit", "enter")
    await until(pilot, lambda: isinstance(app.screen, AuditScreen), "the audit screen")
    screen = audit_screen(app)
    await until(pilot, lambda: screen.loaded, "the records and the verification")
    shown = len(screen.page.rows) if screen.page else 0
    await until(pilot, lambda: len(table_rows(screen)) == shown, "the rows on screen")
    await pilot.pause()
    return screen


async def test_records_newest_first_and_the_chain_intact_with_an_incomplete_action() -> None:
    app = audit_app(FakeAudit())
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        rows = table_rows(screen)
        assert [row[0] for row in rows] == ["7", "6", "5", "4", "3", "2", "1"]
        assert rows[3] == [
            "4",
            "2026-01-01 00:04:00",
            "alice",
            "succeeded",
            "set-max-num-seqs",
            "Deployment ai/vllm",
            "LLMHighP99Latency",
            "succeeded",
        ]
        assert rows[1][7] == "guard: rate limit"
        chain = text_of(screen, "#audit-chain")
        assert "✓ chain intact: 7 records" in chain
        assert "! 1 action incomplete" in chain
        assert "7 records · newest first" in text_of(screen, "#audit-status")
        assert PATH in text_of(screen, "#audit-title")


async def test_the_filter_matches_words_and_esc_clears_it() -> None:
    audit = FakeAudit()
    app = audit_app(audit)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        await pilot.press("slash", *"bob")
        await until(pilot, lambda: len(table_rows(screen)) == 2, "bob's records")
        assert "2 of 7 records match" in text_of(screen, "#audit-status")
        await pilot.press("space", *"refused")
        await until(pilot, lambda: len(table_rows(screen)) == 1, "the refused record")
        assert table_rows(screen)[0][0] == "6"
        await pilot.press("enter")  # the table again, the filter stays
        assert "filter 'bob refused'" in text_of(screen, "#audit-status")
        await pilot.press("escape")
        await until(pilot, lambda: len(table_rows(screen)) == 7, "every record again")
        assert isinstance(app.screen, AuditScreen)


async def test_since_filters_by_time_and_a_bad_since_is_said() -> None:
    clock = FakeClock()  # 2026-01-01 00:00 UTC; the records are from 00:01 to 00:07
    clock.advance(8 * 60)
    app = audit_app(FakeAudit(), clock)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        await pilot.press("slash", *"since:3m")
        await until(pilot, lambda: len(table_rows(screen)) == 3, "the last three minutes")
        assert [row[0] for row in table_rows(screen)] == ["7", "6", "5"]
        await pilot.press(*"x")
        await until(pilot, lambda: "since:3mx" in text_of(screen, "#audit-status"), "the error")
        assert "expected since:DURATION" in text_of(screen, "#audit-status")


async def test_enter_shows_the_record_as_json_and_esc_steps_back() -> None:
    audit = FakeAudit()
    app = audit_app(audit)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        await pilot.press("down", "down", "down", "enter")  # record 4
        pane = screen.query_one("#audit-details-pane")
        await until(pilot, lambda: '"seq": 4' in text_of(screen, "#audit-details"), "details")
        assert pane.has_class("-shown")
        assert '"duration_s": 41.2' in text_of(screen, "#audit-details")
        assert "details 000004-0000abcd" in audit.calls
        await pilot.press("escape")
        await until(pilot, lambda: not pane.has_class("-shown"), "the details closed")
        assert isinstance(app.screen, AuditScreen)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, BoardScreen), "the board")


async def test_r_reads_the_log_and_verifies_again() -> None:
    audit = FakeAudit()
    app = audit_app(audit)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        assert audit.calls.count("verify") == 1
        audit.chain = BROKEN
        await pilot.press("r")
        await until(pilot, lambda: "BROKEN" in text_of(screen, "#audit-chain"), "the break")
        assert audit.calls.count("verify") == 2
        assert "✗ BROKEN at record 4: hash does not match" in text_of(screen, "#audit-chain")


async def test_a_reload_replaced_before_it_started_leaves_no_coroutine_never_awaited() -> None:
    """`r` twice in one loop step: the first reload's workers are cancelled before their
    tasks ever ran, and no coroutine of theirs is dropped unawaited (Python's RuntimeWarning
    would be printed over the terminal)."""
    audit = FakeAudit()
    app = audit_app(audit)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        audit.calls.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            screen.action_reload()
            screen.action_reload()
            await until(pilot, lambda: screen.loaded, "the second reload's answers")
            await until(pilot, lambda: not any(w.group.startswith("audit-") for w in app.workers),
                        "the workers ended")  # fmt: skip
            gc.collect()
        assert sorted(audit.calls) == ["records", "verify"]  # the second reload alone ran
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


async def test_an_unreadable_log_is_said_not_fatal() -> None:
    app = audit_app(FakeAudit(error=PermissionError("audit.jsonl: permission denied")))
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        assert "cannot read the audit log: PermissionError" in text_of(screen, "#audit-status")
        assert "? cannot verify the chain" in text_of(screen, "#audit-chain")
        assert table_rows(screen) == []


# -- the real log ---------------------------------------------------------------------------


def write_log(path: Path, secret: str) -> AuditLog:
    log = AuditLog(path)  # no secrets known: the secret reaches the file, as an old log might
    target = {"kind": "Deployment", "namespace": "ai", "name": "vllm"}
    for transition in ("proposed", "approved", "started", "succeeded"):
        log.append(
            action_id=ACTION,
            transition=transition,
            action="set-max-num-seqs",
            target=target,
            actor={"user": "alice", "host": "oncall-1", "ssh_client": None},
            outcome="succeeded" if transition == "succeeded" else None,
            detail={"note": f"redis at redis://:{secret}@10.0.0.5:6379"},
        )
    return log


def tamper(path: Path, seq: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    edited = json.loads(lines[seq - 1])
    edited["actor"]["user"] = "mallory"
    lines[seq - 1] = json.dumps(edited, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))


async def test_a_real_log_intact_then_tampered_shows_the_first_bad_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    secret = "s3cret-pw"
    write_log(path, secret)
    settings = Settings.model_validate(
        {"audit": {"path": str(path)}, "redis": {"password": secret}}
    )
    app = audit_app(LiveAudit(settings), settings=settings)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        assert "✓ chain intact: 4 records" in text_of(screen, "#audit-chain")
        assert [row[3] for row in table_rows(screen)] == [
            "succeeded",
            "started",
            "approved",
            "proposed",
        ]
        await pilot.press("enter")
        await until(pilot, lambda: '"seq": 4' in text_of(screen, "#audit-details"), "details")
        details = text_of(screen, "#audit-details")
        assert secret not in details
        assert "redis://:***@10.0.0.5:6379" in details

        tamper(path, 2)
        await pilot.press("escape", "r")
        await until(pilot, lambda: "BROKEN" in text_of(screen, "#audit-chain"), "the break")
        chain = text_of(screen, "#audit-chain")
        assert "✗ BROKEN at record 2: hash does not match its content — edited" in chain
        assert "mallory" in [row[2] for row in table_rows(screen)]


async def test_no_log_yet_is_said(tmp_path: Path) -> None:
    path = tmp_path / "state" / "audit.jsonl"
    settings = Settings.model_validate({"audit": {"path": str(path)}})
    app = audit_app(LiveAudit(settings), settings=settings)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_audit(pilot)
        assert f"○ no audit log yet at {path}" in text_of(screen, "#audit-chain")
        assert "0 records" in text_of(screen, "#audit-status")
        assert not path.parent.exists()  # reading never creates anything


def test_parse_query_words_and_since() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
    query = parse_query("  Bob since:30m refused ", now)
    assert query.words == ("bob", "refused")
    assert query.since == datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
    with pytest.raises(Exception, match="since:DURATION"):
        parse_query("since:yesterday", now)


# -- snapshots --------------------------------------------------------------------------------


def then(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        screen = await open_audit(pilot)
        if keys:
            await pilot.press(*keys)
            await until(pilot, lambda: '"seq"' in text_of(screen, "#audit-details"), "the details")
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_audit_intact(snap_compare: Compare, size: tuple[int, int]) -> None:
    app = audit_app(FakeAudit())
    assert snap_compare(app, terminal_size=size, run_before=then())


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_audit_broken_with_details(snap_compare: Compare, size: tuple[int, int]) -> None:
    app = audit_app(FakeAudit(chain=BROKEN))
    assert snap_compare(app, terminal_size=size, run_before=then("down", "down", "down", "enter"))
