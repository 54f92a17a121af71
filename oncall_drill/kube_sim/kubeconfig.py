"""Kubeconfig files pointing at a running simulator, one context per simulated user.

Contexts: `oncall-drill` (the operator, current), `oncall-drill-readonly`, and
`oncall-drill-peer` (a second operator: `oncall --context oncall-drill-peer remediate approve
ID`, or `kubernetes.context` in a second settings file, is the other person of a two-person
action; SelfSubjectReview tells the two apart by their tokens).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml

from oncall_drill.kube_sim.rbac import Users
from oncall_drill.netutil import LOOPBACK

OPERATOR_CONTEXT = "oncall-drill"
READ_ONLY_CONTEXT = "oncall-drill-readonly"
#: A second operator, another person to the cluster: the two-person rule's approver in drills.
PEER_CONTEXT = "oncall-drill-peer"
CLUSTER = "oncall-drill"


def kubeconfig(
    port: int,
    users: Users,
    *,
    namespace: str = "ai",
    cluster: str = CLUSTER,
    operator_context: str = OPERATOR_CONTEXT,
    read_only_context: str = READ_ONLY_CONTEXT,
    ca_file: Path | None = None,
) -> dict[str, Any]:
    """The kubeconfig document: the operator context is current, the read-only one is next to it.

    With `ca_file` (the simulator's self-signed certificate) the server is https on `port`.
    """
    server: dict[str, Any] = {"server": f"http://{LOOPBACK}:{port}"}
    if ca_file is not None:
        data = base64.b64encode(ca_file.read_bytes()).decode("ascii")
        server = {"server": f"https://{LOOPBACK}:{port}", "certificate-authority-data": data}
    contexts = (
        (operator_context, "operator", users.operator),
        (read_only_context, "read-only", users.read_only),
        (PEER_CONTEXT, "peer", users.peer),
    )
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": cluster, "cluster": server}],
        "users": [
            {"name": f"{cluster}-{label}", "user": {"token": user.token}}
            for _, label, user in contexts
        ],
        "contexts": [
            {
                "name": name,
                "context": {
                    "cluster": cluster,
                    "user": f"{cluster}-{label}",
                    "namespace": namespace,
                },
            }
            for name, label, _ in contexts
        ],
        "current-context": operator_context,
    }


def write_kubeconfig(
    path: Path, port: int, users: Users, *, ca_file: Path | None = None, **options: str
) -> Path:
    """Write the kubeconfig (mode 0600: it holds bearer tokens) and return its path. Written
    to a temporary file and renamed, so that a reader that sees the file sees all of it (a
    client started alongside the simulator read an empty file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(kubeconfig(port, users, ca_file=ca_file, **options), sort_keys=False)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    partial.replace(path)
    return path
