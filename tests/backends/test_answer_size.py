"""The HTTP backends' answer-size bound (oncall/backends/answer_size.py), attacked as a hostile
backend or a proxy posing as one would: a gzip bomb (half a megabyte that inflates to 512 MiB),
an endless body, a Content-Length of 10 GiB; and the edge: an answer of exactly the bound
passes, one byte more fails. Every failure is a BackendError naming the bound, never a
traceback, and the memory it took stays near the bound (tracemalloc's peak), not the bomb's.

Real loopback servers (tests/harness/faults.py), the real clients and httpx underneath.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from oncall.backends.alertmanager import AlertmanagerClient
from oncall.backends.answer_size import MIB
from oncall.backends.http import HttpBackend
from oncall.backends.prometheus import PrometheusClient
from oncall.backends.vllm import VllmClient
from oncall.errors import BackendError
from tests.harness.faults import gzip_bomb, http_stub, streaming_server, with_peak

#: Generous: the guard, not the clock, must end each of these.
TIMEOUT = 10.0
BOMB_MIB = 512
GZIP = {"Content-Encoding": "gzip"}


def test_the_bomb_is_what_it_claims() -> None:
    assert gzip.decompress(gzip_bomb(3)) == bytes(3 * MIB)
    assert len(gzip_bomb(BOMB_MIB)) < MIB  # 1,000 : 1


def _rules(client: HttpBackend) -> Awaitable[Any]:
    assert isinstance(client, PrometheusClient)
    return client.rules(kind="alert")  # received raw, inflated in a worker thread


def _query(client: HttpBackend) -> Awaitable[Any]:
    assert isinstance(client, PrometheusClient)
    return client.query("up")  # received and inflated by the transport, on the loop


def _am_alerts(client: HttpBackend) -> Awaitable[Any]:
    assert isinstance(client, AlertmanagerClient)
    return client.alerts()


def _vllm_metrics(client: HttpBackend) -> Awaitable[Any]:
    assert isinstance(client, VllmClient)
    return client.metrics()


Call = tuple[type[HttpBackend], Callable[[HttpBackend], Awaitable[Any]]]
CALLS: dict[str, Call] = {
    "prometheus rules": (PrometheusClient, _rules),
    "prometheus query": (PrometheusClient, _query),
    "alertmanager alerts": (AlertmanagerClient, _am_alerts),
    "vllm metrics": (VllmClient, _vllm_metrics),
}


async def _refused(url: str, call: Call) -> BackendError:
    kind, ask = call
    async with kind(url, timeout=TIMEOUT) as client:
        with pytest.raises(BackendError) as caught:
            await ask(client)
    return caught.value


def _too_large(error: BackendError, kind: type[HttpBackend]) -> bool:
    bound = f"answer larger than {kind.MAX_ANSWER_BYTES // MIB} MiB"
    return error.reason == "bad payload" and error.detail == bound


@pytest.mark.parametrize("name", list(CALLS))
async def test_a_gzip_bomb_fails_near_the_bound_not_at_its_size(name: str) -> None:
    """Without the bound httpx inflates each received chunk whole and the answer is held
    whole: 512 MiB and more. With it the inflating stops one step past the bound."""
    kind, _ = call = CALLS[name]
    bomb = gzip_bomb(BOMB_MIB)
    with http_stub(200, bomb, "application/json", GZIP) as url:
        error, peak = await with_peak(_refused(url, call))
    assert _too_large(error, kind), error
    assert peak < 3 * kind.MAX_ANSWER_BYTES


@pytest.mark.parametrize("name", ["prometheus rules", "prometheus query"])
async def test_an_endless_body_is_cut_at_the_bound(name: str) -> None:
    """A proxy's page that never ends (4 GiB, no Content-Length): the client stops reading
    once the bound has come, long before its timeout."""
    kind, _ = call = CALLS[name]
    with streaming_server(b" " * MIB, 4096) as url:
        error = await _refused(url, call)
    assert _too_large(error, kind), error


async def test_a_declared_length_over_the_bound_fails_before_the_body() -> None:
    """Content-Length: 10 GiB, one byte sent, the connection held open: refused on the
    header (reading on would wait for the timeout)."""
    call = CALLS["prometheus query"]
    with streaming_server(b"{", 1, declared=10 << 30) as url:
        error = await _refused(url, call)
    assert _too_large(error, PrometheusClient), error


class SmallPrometheus(PrometheusClient):
    MAX_ANSWER_BYTES = MIB


def _padded(document: dict[str, Any], size: int) -> bytes:
    """`document` as JSON of exactly `size` bytes (trailing whitespace is JSON too)."""
    body = json.dumps(document).encode()
    return body + b" " * (size - len(body))


RULES = {"status": "success", "data": {"groups": []}}
VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
@pytest.mark.parametrize("name", ["prometheus rules", "prometheus query"])
async def test_an_answer_of_exactly_the_bound_passes_one_byte_more_fails(
    name: str, encoding: str
) -> None:
    _, ask = CALLS[name]
    document = RULES if name == "prometheus rules" else VECTOR
    headers = GZIP if encoding == "gzip" else {}
    pack = gzip.compress if encoding == "gzip" else bytes
    with http_stub(200, pack(_padded(document, MIB)), "application/json", headers) as url:
        async with SmallPrometheus(url, timeout=TIMEOUT) as prom:
            assert await ask(prom) == []
    with http_stub(200, pack(_padded(document, MIB + 1)), "application/json", headers) as url:
        error = await _refused(url, (SmallPrometheus, ask))
    assert _too_large(error, SmallPrometheus), error


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [
        ("deflate", zlib.compress),
        ("deflate", _raw_deflate),  # what some servers send for "deflate": httpx took it too
        ("gzip, deflate", lambda data: zlib.compress(gzip.compress(data))),
        ("GZip", gzip.compress),
        ("identity", bytes),
    ],
    ids=["zlib", "raw-deflate", "two", "case", "identity"],
)
@pytest.mark.parametrize("name", ["prometheus rules", "prometheus query"])
async def test_encodings_inflate_as_httpx_inflated_them(
    name: str, encoding: str, pack: Callable[[bytes], bytes]
) -> None:
    """The bound's own inflating gives what httpx's decoders gave, for what they took."""
    _, ask = CALLS[name]
    groups: list[dict[str, Any]] = [{"name": "g", "rules": []}] * 3000  # 90 KB: over one STEP
    rules = {"status": "success", "data": {"groups": groups}}
    body = json.dumps(rules if name == "prometheus rules" else VECTOR).encode()
    expected = groups if name == "prometheus rules" else []
    with http_stub(200, pack(body), "application/json", {"Content-Encoding": encoding}) as url:
        async with PrometheusClient(url, timeout=TIMEOUT) as prom:
            assert await ask(prom) == expected


@pytest.mark.parametrize("name", ["prometheus rules", "prometheus query"])
async def test_a_corrupt_compressed_body_is_a_bad_payload(name: str) -> None:
    kind, ask = CALLS[name]
    packed = bytearray(gzip.compress(json.dumps(VECTOR).encode() * 50))
    packed[20:40] = bytes(20)
    with http_stub(200, bytes(packed), "application/json", GZIP) as url:
        error = await _refused(url, (kind, ask))
    assert error.reason == "bad payload" and "answer larger" not in error.detail
