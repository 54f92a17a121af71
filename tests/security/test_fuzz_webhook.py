"""Fuzzing of `oncall serve`'s webhook body (issue 30): whatever arrives, the parser answers a
notification or a PayloadError with its reason (a 400), and the app answers a 4xx or 200 as
JSON — never an exception, never a label with a control character taken in.

Hypothesis mutates a real Alertmanager notification (fixtures/alertmanager/webhook-firing.json)
with the suite's hostile tokens, and also makes structures and raw bytes. HOSTILE_CORPUS=DIR
feeds each file of a corpus made elsewhere through the parser and the running app too.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from oncall.serve.payload import _CONTROL, PayloadError, parse
from tests.security.test_fuzz_inputs import FUZZ, HOSTILE_TOKENS, over_hostile_corpus, structures

REPO = Path(__file__).resolve().parents[2]
REAL = (REPO / "fixtures/alertmanager/webhook-firing.json").read_text(encoding="utf-8")


@st.composite
def mutated_notification(draw: st.DrawFn) -> bytes:
    text = REAL
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(HOSTILE_TOKENS)) + text[at:]
    return text.encode("utf-8", "surrogatepass")


@st.composite
def shaped(draw: st.DrawFn) -> bytes:
    """Valid JSON of the right shape with hostile values: reaches the per-alert checks."""
    value = draw(st.sampled_from(HOSTILE_TOKENS) | st.text(max_size=20))
    body = json.loads(REAL)
    alert = body["alerts"][0]
    where = draw(st.sampled_from(["label", "label_name", "annotation", "fingerprint", "starts"]))
    if where == "label":
        alert["labels"]["pod"] = value
    elif where == "label_name":
        alert["labels"][value] = "x"
    elif where == "annotation":
        alert["annotations"][value] = value
    elif where == "fingerprint":
        alert["fingerprint"] = value
    else:
        alert["startsAt"] = value
    return json.dumps(body, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


bodies = st.one_of(
    mutated_notification(),
    shaped(),
    structures.map(lambda v: json.dumps(v, default=str).encode()),
    st.binary(max_size=200),
)


def _check(body: bytes) -> None:
    try:
        parsed = parse(body, context="c", received_at=0.0)
    except PayloadError as exc:
        assert exc.reason in ("bad_json", "bad_payload", "unsupported_version")
        assert str(exc)
        return
    for firing in parsed.firings:
        assert firing.alert
        for text in [*firing.labels.values(), *firing.annotations.values(), firing.fingerprint]:
            assert not _CONTROL.search(text)


@FUZZ
@given(body=bodies)
def test_webhook_bodies(body: bytes) -> None:
    _check(body)


@over_hostile_corpus
def test_hostile_corpus_as_webhook_body(path: Path) -> None:
    _check(path.read_bytes()[: 2 << 20])


def test_the_app_answers_every_fuzzed_body_as_json(tmp_path: Path) -> None:
    """Hostile bodies through the aiohttp app (no checklist runs: the runbook
    folder is empty): each answer is a 200 or a 400 with a JSON reason."""
    from oncall.serve.app import make_app
    from oncall.serve.auth import Credentials
    from oncall.serve.metrics import ServeMetrics
    from oncall.serve.notify import Notifier
    from oncall.serve.pool import Pool
    from oncall.service.verdicts import store_from_settings
    from oncall.settings import Settings

    settings = Settings(runbooks={"dirs": [str(tmp_path)]}, redis={"url": "redis://127.0.0.1:1/0"})
    # Each hostile token at three places of the real body (deterministic, unlike .example()).
    places = (1, len(REAL) // 2, len(REAL) - 2)
    samples = [(REAL[:at] + token + REAL[at:]).encode("utf-8", "surrogatepass")
               for token in HOSTILE_TOKENS for at in places] + [REAL.encode()]  # fmt: skip

    async def run() -> None:
        metrics = ServeMetrics()
        pool = Pool(settings, store_from_settings(settings), Notifier([], metrics), metrics,
                    replica="fuzz")  # fmt: skip
        app = make_app(pool, metrics, Credentials(), path="/hook", max_body=1 << 20)
        async with TestClient(TestServer(app)) as client:
            for body in samples:
                answer = await client.post("/hook", data=body)
                assert answer.status in (200, 400), await answer.text()
                assert "status" in await answer.json()
        await pool.aclose()

    asyncio.run(run())
