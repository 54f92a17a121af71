"""Digits that are not ASCII, where another system's text is read as a number.

`str.isdigit()` is true for "³" (which `int()` refuses: a traceback) and for "٣" (which `int()`
reads as 3). A dcgm-exporter label, an answer's Content-Length and a two-person request's pid in
Redis are written by systems a hostile operator may control: each must read as "no number",
never crash the decode nor pass for a number it does not spell (oncall/model/numbers.py).
"""

from __future__ import annotations

import os
import socket

import httpx
import pytest

from oncall.backends.answer_size import BoundedTransport
from oncall.backends.dcgm import devices_from_dcgm
from oncall.model.metrics import Sample
from oncall.model.numbers import ascii_int
from oncall.remediation.two_person import _requester_gone

NOT_ASCII = ["³", "²", "٣", "１", "1³"]


@pytest.mark.parametrize("text", NOT_ASCII)
def test_only_ascii_digits_make_a_number(text: str) -> None:
    assert text.isdigit() or not text.isascii()  # what fooled str.isdigit() before
    assert ascii_int(text) is None
    assert ascii_int("042") == 42


@pytest.mark.parametrize("text", NOT_ASCII)
def test_a_gpu_index_label_that_is_no_ascii_number_is_no_index(text: str) -> None:
    labels = {"gpu": text, "UUID": "GPU-1", "Hostname": "n1", "GPU_I_ID": text}
    samples = [Sample({"__name__": "DCGM_FI_DEV_FB_USED", **labels}, 0.0, 10.0)]
    [device] = devices_from_dcgm(samples)
    assert device.index == -1


@pytest.mark.parametrize("declared", ["²", "٣٣٣٣٣٣٣٣٣٣"])
async def test_a_content_length_that_is_no_ascii_number_is_not_trusted(declared: str) -> None:
    """A proxy's header is not a size: the body is bounded as it arrives instead."""

    def answer(request: httpx.Request) -> httpx.Response:
        header = [(b"content-length", declared.encode())]  # as bytes off the wire: UTF-8
        return httpx.Response(200, headers=header, content=b"{}")

    transport = BoundedTransport(httpx.MockTransport(answer), limit=1024)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get("http://127.0.0.1/")
        assert response.headers["content-length"] == declared  # what the guard was given
    assert response.content == b"{}"


@pytest.mark.parametrize("pid", NOT_ASCII)
def test_a_two_person_request_whose_pid_is_no_ascii_number_is_not_judged_gone(pid: str) -> None:
    request = {"host": socket.gethostname(), "pid": pid}
    assert _requester_gone(request) is None
    assert _requester_gone({"host": socket.gethostname(), "pid": str(os.getpid())}) is None
