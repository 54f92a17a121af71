"""A bound on the size of an HTTP backend's answer: on the bytes received and on the bytes
they inflate to.

Without one, a backend, or anything posing as one (a proxy's endless page, a gzip bomb:
a megabyte that inflates to gigabytes), makes oncall read and hold as much as it sends.
`BoundedTransport` wraps the client's transport: it refuses a declared `Content-Length` over
the bound before reading anything, stops reading the body once more than the bound has come,
and inflates gzip/deflate itself, in steps of `STEP` bytes (`zlib.decompressobj` with
`max_length`), stopping once the inflated bytes pass the bound: httpx's own decoders inflate
each received chunk whole (a 64 KiB chunk of a bomb is 64 MiB). Either way the answer fails
with `AnswerTooLarge` ("answer larger than 64 MiB"), which `exchange` makes a "bad payload".

A request marked `RAW` (the Prometheus rules answer, inflated in a worker thread) gets its
body counted but not inflated; `inflated_body` then inflates it, under the same bound, where
it is read.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence

import httpx

from oncall.model.numbers import ascii_int

MIB = 1 << 20
#: The most bytes one `decompress` call makes: what an answer may overshoot its bound by.
STEP = 64 * 1024
#: Request extension: count this answer's body but leave it compressed (see `inflated_body`).
RAW = "oncall.raw_body"
#: What we ask for: the encodings `Inflater` inflates (httpx would add br/zstd when their
#: packages are installed, which it would inflate whole, unbounded).
ACCEPT_ENCODING = "gzip, deflate"
_INFLATED = ("gzip", "deflate")


class AnswerTooLarge(httpx.DecodingError):
    """An answer went past its bound (received, or inflated)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"answer larger than {limit / MIB:g} MiB")


def content_encodings(headers: httpx.Headers) -> list[str]:
    """The Content-Encoding values as httpx reads them: lowercase, in the order applied."""
    return [v.strip().lower() for v in headers.get_list("content-encoding", split_commas=True)]


class _Stage:
    """One encoding undone: gzip, or deflate (zlib-wrapped, or raw as some servers send it:
    httpx's own fallback, on the first block)."""

    def __init__(self, encoding: str) -> None:
        self._may_be_raw = encoding == "deflate"
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding == "gzip" else 15)

    def inflate(self, pieces: Iterable[bytes], final: bool) -> Iterator[bytes]:
        for piece in pieces:
            yield from self._inflate(piece)
        if final:
            try:
                # The steps left nothing pending (each ended short of STEP): this is small.
                tail = self._zlib.flush()
            except zlib.error as exc:
                raise httpx.DecodingError(str(exc)) from exc
            if tail:
                yield tail

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._zlib.decompress(data, STEP)
            except zlib.error as exc:
                if not self._may_be_raw:
                    raise httpx.DecodingError(str(exc)) from exc
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                self._may_be_raw = False
                continue
            self._may_be_raw = False
            if out:
                yield out
            data = self._zlib.unconsumed_tail
            if not data and len(out) < STEP:  # all input taken, nothing more pending
                return


class Inflater:
    """Undoes an answer's Content-Encoding chunk by chunk, never holding more than STEP
    inflated bytes at a time, and raises AnswerTooLarge once the total passes `limit`.
    Encodings other than gzip/deflate are left as they are (as httpx does)."""

    def __init__(self, encodings: Sequence[str], limit: int) -> None:
        self._stages = [_Stage(e) for e in reversed(encodings) if e in _INFLATED]
        self._limit = limit
        self._size = 0

    def feed(self, data: bytes, *, final: bool = False) -> Iterator[bytes]:
        """The inflated bytes of the next chunk (`final`: of the last, with what is left)."""
        pieces: Iterable[bytes] = (data,)
        for stage in self._stages:
            pieces = stage.inflate(pieces, final)
        for piece in pieces:
            self._size += len(piece)
            if self._size > self._limit:
                raise AnswerTooLarge(self._limit)
            yield piece


def _plain_headers(headers: httpx.Headers) -> httpx.Headers:
    """The headers of an answer inflated here: no Content-Encoding for httpx to undo again,
    no Content-Length of the compressed body."""
    plain = httpx.Headers(headers)
    for name in ("content-encoding", "content-length"):
        if name in plain:
            del plain[name]
    return plain


class _BoundedBody(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int, inflater: Inflater | None):
        self._inner = inner
        self._limit = limit
        self._inflater = inflater

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                raise AnswerTooLarge(self._limit)  # stop reading: httpx closes the stream
            if self._inflater is None:
                yield chunk
            else:
                for piece in self._inflater.feed(chunk):
                    yield piece
        if self._inflater is not None:
            for piece in self._inflater.feed(b"", final=True):
                yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx.AsyncBaseTransport):
    """`inner`, with every answer bounded to `limit` bytes received and inflated."""

    def __init__(self, inner: httpx.AsyncBaseTransport, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        declared = response.headers.get("content-length", "")
        size = ascii_int(declared)
        if size is not None and size > self.limit:
            await response.aclose()
            raise AnswerTooLarge(self.limit)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)  # an async transport's
        encodings = content_encodings(response.headers)
        if request.extensions.get(RAW) or not encodings:
            body, headers = _BoundedBody(stream, self.limit, None), response.headers
        else:
            inflater = Inflater(encodings, self.limit)
            body = _BoundedBody(stream, self.limit, inflater)
            headers = _plain_headers(response.headers)
        return httpx.Response(
            response.status_code, headers=headers, stream=body, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _InflatedBody(httpx.SyncByteStream):
    def __init__(self, raw: bytes, inflater: Inflater) -> None:
        self._raw = raw
        self._inflater = inflater

    def __iter__(self) -> Iterator[bytes]:
        yield from self._inflater.feed(self._raw, final=True)


def inflated_body(
    response: httpx.Response, raw: bytes, limit: int
) -> tuple[httpx.Headers, httpx.SyncByteStream]:
    """Headers and body for an answer whose `raw` (still compressed) body was received with
    `RAW`: reading the body inflates it, bounded to `limit` bytes, wherever it is read."""
    encodings = content_encodings(response.headers)
    if not encodings:
        return response.headers, httpx.ByteStream(raw)
    return _plain_headers(response.headers), _InflatedBody(raw, Inflater(encodings, limit))
