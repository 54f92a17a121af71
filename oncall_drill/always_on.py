"""`oncall serve` in the drill: the drill's Alertmanager sends its notifications to a real
`oncall serve`, which sends each verdict's summary to a local sink standing in for the chat.

`drill up` starts the sink (oncall_drill/notify_sink.py), points Alertmanager's receiver at
serve's webhook with a bearer token from a file, and starts `python -m oncall serve` with the
`serve:` section written here; `oncall drill notifications` prints what the sink received.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from oncall_drill.components import Ports
from oncall_drill.netutil import LOOPBACK

#: `oncall serve`'s path, where the drill's Alertmanager sends its notifications.
SERVE_PATH = "/alertmanager/webhook"
#: What the sink received, one JSON line each, in the drill directory.
NOTIFICATIONS = "notifications.jsonl"


def serve_token(directory: Path) -> Path:
    """The bearer token Alertmanager sends `oncall serve`, in a file only we can read."""
    path = directory / "serve-token"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_hex(16) + "\n")
    return path


def serve_settings(directory: Path, ports: Ports) -> dict[str, Any]:
    """The `serve:` section of the drill's oncall.yaml."""
    sink = f"{ports.url('notify_sink')}/hook/drill-chat"
    return {
        "listen": f"{LOOPBACK}:{ports.serve}",
        "webhook_path": SERVE_PATH,
        "token_file": str(serve_token(directory)),
        "notify": [{"name": "drill-chat", "url": sink, "format": "slack"}],
    }
