"""JSON decoding in slices, for the big answers a board refresh reads in a worker thread.

`json.loads` is one C call that holds the GIL from the first byte to the last: run in a
worker thread on a 2.3 MB `/api/v1/rules` answer it still stops the event loop for its whole
duration (the loop's thread cannot take the GIL back). `loads_sliced` gives the same value as
`json.loads`, but walks the outer `depth` levels of arrays and objects itself and decodes each
value below them with one `raw_decode` call: between two calls the thread runs bytecode, so
the interpreter hands the GIL to the loop within its switch interval (5 ms). The values at
`depth` are small (one alert, one label set), so no single call holds the GIL for long.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def loads_sliced(data: bytes | str, depth: int) -> Any:
    """`json.loads(data)`, decoded in slices below the outer `depth` levels (see above).

    Raises `json.JSONDecodeError` (a ValueError) on malformed JSON and `UnicodeDecodeError`
    on bytes that are not UTF-8/16/32, as `json.loads` does."""
    text = _text(data)
    value, end = _value(text, _skip(text, 0), depth)
    end = _skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def array_items(data: bytes | str) -> Iterator[Any] | None:
    """The items of a JSON array one at a time, each decoded when asked for (one `raw_decode`
    call); None when the value is not an array (decode it whole to say what it is).

    The same items as `json.loads(data)`, and the same errors, raised when the iteration
    reaches them (an error after the last item as well). One item at a time, a caller that
    turns each into something smaller lets the decoded item go before the next: the whole
    answer's objects are never alive at once (`gc_pause`)."""
    text = _text(data)
    pos = _skip(text, 0)
    if text[pos : pos + 1] != "[":
        return None
    return _items(text, _skip(text, pos + 1))


def _items(text: str, pos: int) -> Iterator[Any]:
    if text[pos : pos + 1] != "]":
        while True:
            item, pos = _DECODER.raw_decode(text, pos)
            yield item
            pos = _skip(text, pos)
            mark = text[pos : pos + 1]
            if mark == "]":
                break
            if mark != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
            pos = _skip(text, pos + 1)
    end = _skip(text, pos + 1)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)


def _text(data: bytes | str) -> str:
    return (
        data if isinstance(data, str) else data.decode(json.detect_encoding(data), "surrogatepass")
    )


def _skip(text: str, pos: int) -> int:
    found = _SPACE.match(text, pos)
    return found.end() if found else pos


def _value(text: str, pos: int, depth: int) -> tuple[Any, int]:
    opening = text[pos : pos + 1]
    if depth <= 0 or opening not in ("[", "{"):
        # A scalar, or a container small enough to decode in one call.
        return _DECODER.raw_decode(text, pos)
    closing = "]" if opening == "[" else "}"
    items: list[Any] = []
    fields: dict[str, Any] = {}
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == closing:
        return (items if opening == "[" else fields), pos + 1
    while True:
        if opening == "[":
            item, pos = _value(text, pos, depth - 1)
            items.append(item)
        else:
            if text[pos : pos + 1] != '"':
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", text, pos
                )
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if text[pos : pos + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
            fields[key], pos = _value(text, _skip(text, pos + 1), depth - 1)
        pos = _skip(text, pos)
        mark = text[pos : pos + 1]
        if mark == closing:
            return (items if opening == "[" else fields), pos + 1
        if mark != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        pos = _skip(text, pos + 1)
