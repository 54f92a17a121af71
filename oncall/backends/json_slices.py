"""A JSON array decoded one item at a time, for the big answers a board refresh reads in a worker.

`json.loads` is one C call that holds the GIL from the first byte to the last: run in a
worker thread on Alertmanager's 2.4 MB `/api/v2/alerts` answer it still stops the event loop
for its whole duration (the loop's thread cannot take the GIL back). `array_items` gives the
same items as `json.loads`, each decoded by its own `raw_decode` call: between two calls the
thread runs bytecode, so the interpreter hands the GIL to the loop within its switch interval
(5 ms). One item (one alert) is small, so no single call holds the GIL for long.
(`/api/v1/rules` is decoded whole, with a switch point per object instead:
`oncall.backends.prometheus`.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def array_items(data: bytes | str) -> Iterator[Any] | None:
    """The items of a JSON array one at a time, each decoded when asked for (one `raw_decode`
    call); None when the value is not an array (decode it whole to say what it is).

    The same items as `json.loads(data)`, and the same errors, raised when the iteration
    reaches them (an error after the last item as well). One item at a time, a caller that
    turns each into something smaller lets the decoded item go before the next: the whole
    answer's objects are never alive at once (`oncall.runtime`)."""
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
