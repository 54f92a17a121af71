"""The Kubernetes client's answer-size bound (oncall/backends/kube_http.py, `BoundedTransport`
as for the HTTP backends), attacked as an API server, or a proxy posing as one, would: a gzip
bomb as the pod list (half a megabyte inflating to 512 MiB), an endless body, a Content-Length
of 10 GiB held open; and a gzip-encoded list within the bound still reads. Each failure is a
"bad payload" naming the bound, before the request's timeout, never a traceback.

Real loopback servers (tests/harness/faults.py), the real reader and httpx underneath.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from oncall.backends.answer_size import MIB
from oncall.backends.kube import KubeReader
from oncall.backends.kube_http import KubeHttp
from oncall.errors import BackendError
from oncall.settings.model import KubernetesSettings
from tests.harness.faults import gzip_bomb, http_stub, kubeconfig_for, streaming_server, with_peak

#: Generous: the bound, not the clock, must end each of these.
TIMEOUT = 30.0
GZIP = {"Content-Encoding": "gzip"}


async def _pods(tmp_path: Path, url: str) -> list[dict[str, object]]:
    path = kubeconfig_for(tmp_path / "kubeconfig", url)
    reader = await KubeReader.open(KubernetesSettings(kubeconfig=path, timeout=TIMEOUT))
    try:
        return await reader.list_pods("ai", "app=vllm")
    finally:
        await reader.aclose()


async def _refused(tmp_path: Path, url: str) -> BackendError:
    with pytest.raises(BackendError) as caught:
        await _pods(tmp_path, url)
    return caught.value


def _too_large(error: BackendError, bound: int) -> bool:
    said = f"answer larger than {bound // MIB} MiB"
    return error.backend == "kubernetes" and error.reason == "bad payload" and error.detail == said


async def test_a_gzip_bomb_as_the_pod_list_fails_at_the_bound(tmp_path: Path) -> None:
    """With the real bound (256 MiB): the inflating stops one step past it, and the memory
    taken stays near the bound, not at the bomb's 512 MiB and more."""
    assert KubeHttp.MAX_ANSWER_BYTES == 256 * MIB
    with http_stub(200, gzip_bomb(512), "application/json", GZIP) as url:
        error, peak = await with_peak(_refused(tmp_path, url))
    assert _too_large(error, KubeHttp.MAX_ANSWER_BYTES), error
    assert peak < 3 * KubeHttp.MAX_ANSWER_BYTES


async def test_an_endless_body_is_cut_at_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page that never ends (4 GiB, no Content-Length), against a bound of 8 MiB (so that
    the test does not stream 256 MiB): the reader stops reading once the bound has come."""
    monkeypatch.setattr(KubeHttp, "MAX_ANSWER_BYTES", 8 * MIB)
    with streaming_server(b" " * MIB, 4096) as url:
        error = await _refused(tmp_path, url)
    assert _too_large(error, 8 * MIB), error


async def test_a_declared_length_over_the_bound_fails_before_the_body(tmp_path: Path) -> None:
    """Content-Length: 10 GiB, one byte sent, the connection held open: refused on the
    header, long before the 30 s timeout would end it."""
    with streaming_server(b"{", 1, declared=10 << 30) as url:
        error = await _refused(tmp_path, url)
    assert _too_large(error, KubeHttp.MAX_ANSWER_BYTES), error


async def test_a_gzip_encoded_list_within_the_bound_reads(tmp_path: Path) -> None:
    """The transport inflates gzip itself now: a compressed PodList is read as before."""
    pods = [{"metadata": {"name": f"vllm-{i}", "namespace": "ai"}} for i in range(3)]
    body = json.dumps({"kind": "PodList", "metadata": {}, "items": pods}).encode()
    with http_stub(200, gzip.compress(body), "application/json", GZIP) as url:
        found = await _pods(tmp_path, url)
    assert [p["metadata"] for p in found] == [p["metadata"] for p in pods]
