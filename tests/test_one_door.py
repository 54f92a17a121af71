"""One door to the backends: only `backends/from_settings.py` makes a backend client from the
settings, and `remediation/clients.py` the write path's own writers from the same settings.

A second place that builds a client (as `remediation/clients.py` once did) reads a setting its
own way — a tenant header, a token, a timeout left out — so the board and a remediation's
verification would talk to two different Prometheus. The scan reads the source as Python
(`ast`), not as text: a call spelled across lines, or through an attribute, is still a call.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import oncall

PACKAGE = Path(oncall.__file__).parent

#: What makes a client of a backend: its constructor, or `open` on its class.
CLIENT_CLASSES = frozenset(
    {
        "PrometheusClient",
        "AlertmanagerClient",
        "AlertmanagerWriter",
        "RedisClient",
        "VllmClient",
        "NvmlClient",
        "KubeReader",
        "KubeWriter",
    }
)

#: Where each may be made, beside the module that defines it (its own `cls(...)`).
DOORS = {
    Path("backends/from_settings.py"): CLIENT_CLASSES - {"AlertmanagerWriter", "KubeWriter"},
    Path("remediation/clients.py"): frozenset({"AlertmanagerWriter", "KubeWriter"}),
}


def client_calls(source: str) -> list[tuple[int, str]]:
    """(line, class name) of each call that makes a client: `X(...)`, `mod.X(...)`,
    `X.open(...)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "open":
            func = func.value
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in CLIENT_CLASSES:
            found.append((node.lineno, name))
    return found


def defines(source: str) -> set[str]:
    return {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)}


def test_only_the_doors_make_backend_clients() -> None:
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        own = defines(source) | DOORS.get(path.relative_to(PACKAGE), frozenset())
        strays += [f"{path}:{line} makes a {name}" for line, name in client_calls(source)
                   if name not in own]  # fmt: skip
    assert not strays, "make clients in oncall/backends/from_settings.py:\n" + "\n".join(strays)


@pytest.mark.parametrize(
    "source",
    [
        "PrometheusClient('http://127.0.0.1:9090', timeout=1)",
        "prometheus.PrometheusClient(url)",
        "await KubeReader.open(settings.kubernetes)",
        "RedisClient(\n    url,\n    timeout=t,\n)",
        "lambda: VllmClient(url)",
    ],
)
def test_the_scan_sees_every_spelling_of_a_client_made(source: str) -> None:
    assert client_calls(source), source


def test_the_scan_passes_over_what_makes_no_client() -> None:
    source = "prometheus_client(settings)\nRedisWriter(client)\nopen('f')\nx.open()\n"
    assert client_calls(source) == []
