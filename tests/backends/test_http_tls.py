"""The HTTP backends' TLS: an https URL verifies against the CA bundle (loaded once per
process); an http URL, which never uses TLS, does not load the bundle at all."""

from __future__ import annotations

import ssl

import httpx
import pytest

from oncall.backends import http
from oncall.backends.answer_size import BoundedTransport
from oncall.backends.prometheus import PrometheusClient


def _context(client: PrometheusClient) -> ssl.SSLContext:
    bounded = client._http._transport
    assert isinstance(bounded, BoundedTransport)  # the answer-size bound, around httpx's
    transport = bounded.inner
    assert isinstance(transport, httpx.AsyncHTTPTransport)
    context = transport._pool._ssl_context
    assert context is not None
    return context


async def test_an_http_url_does_not_load_the_ca_bundle() -> None:
    """Issue 15 (a fresh `oncall check`): loading the bundle is ≈ 50 ms of CPU. The context an
    http client holds trusts no CA, so TLS through it, were it ever used, refuses everything."""
    http.verifying_context.cache_clear()
    async with PrometheusClient("http://127.0.0.1:9", timeout=1.0) as client:
        context = _context(client)
    assert http.verifying_context.cache_info().misses == 0
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert context.cert_store_stats()["x509_ca"] == 0


@pytest.mark.parametrize("url", ["https://127.0.0.1:9", "HTTPS://prometheus.example:443"])
async def test_an_https_url_verifies_with_the_shared_bundle(url: str) -> None:
    http.verifying_context.cache_clear()
    async with PrometheusClient(url, timeout=1.0) as one, PrometheusClient(url, timeout=1.0) as two:
        assert _context(one) is _context(two) is http.verifying_context()
    assert http.verifying_context.cache_info().misses == 1
    assert _context(one).cert_store_stats()["x509_ca"] > 0
