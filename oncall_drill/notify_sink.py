"""The drill's chat: a local webhook sink that keeps what `oncall serve` sends it.

`python -m oncall_drill.notify_sink --port P --file F`: every POST to `/hook/<name>` is kept,
as one JSON line {"at", "name", "body"} appended to F (bounded: at most `MAX_KEPT` messages and
`MAX_BODY` bytes each, a larger one is answered 413 like a real chat would); `GET /messages`
returns them. `oncall drill notifications` prints the file. It stands in for a Slack,
Mattermost or Rocket.Chat incoming webhook, which answers 200 "ok".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from aiohttp import web

from oncall_drill.netutil import LOOPBACK
from oncall_drill.simhttp import serve_until_signal

MAX_KEPT = 1000
MAX_BODY = 256 * 1024


def make_app(file: Path) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    kept = {"count": 0}

    async def hook(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.Response(status=400, text="invalid_payload")
        if kept["count"] >= MAX_KEPT:
            return web.Response(status=429, text="rate_limited")
        kept["count"] += 1
        line = {"at": time.time(), "name": request.match_info["name"], "body": body}
        with file.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
        return web.Response(text="ok")

    async def messages(_request: web.Request) -> web.Response:
        return web.json_response(read_messages(file))

    app.router.add_post("/hook/{name}", hook)
    app.router.add_get("/messages", messages)
    return app


def read_messages(file: Path) -> list[dict[str, object]]:
    if not file.is_file():
        return []
    out = []
    for line in file.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="notify_sink")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", type=Path, required=True)
    args = parser.parse_args()
    banner = f"notify sink on http://{LOOPBACK}:{args.port}/hook/NAME, keeping {args.file}"
    return asyncio.run(serve_until_signal(make_app(args.file), LOOPBACK, args.port, banner))


if __name__ == "__main__":
    raise SystemExit(main())
