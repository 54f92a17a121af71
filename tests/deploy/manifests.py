"""The Kubernetes manifests of `oncall serve` (deploy/kubernetes/) as the tests read them.

`rendered()` is what `kubectl kustomize` makes of the base, the objects `kubectl apply -k`
sends; None where no kubectl is installed (the tests that need the rendering skip, naming why;
Debian's kubernetes-client 1.20 is too old to install for it). `objects()` is the rendering, or
else the base's `resources:` files as written: every check of their content runs either way.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kubernetes"
KUBECTL_TIMEOUT_S = 60

Obj = dict[str, Any]


def kubectl() -> str | None:
    return shutil.which("kubectl")


def documents(text: str) -> list[Obj]:
    """The non-empty YAML documents of a multi-document stream, each a mapping."""
    docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    assert all(isinstance(doc, dict) for doc in docs), docs
    return docs


def render(base: Path) -> list[Obj]:
    """`kubectl kustomize BASE`, parsed; a failure shows kubectl's own message."""
    found = kubectl()
    assert found is not None
    proc = subprocess.run(
        [found, "kustomize", str(base)],
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"kubectl kustomize {base}: exit {proc.returncode}\n{proc.stderr}"
    return documents(proc.stdout)


@functools.cache
def _rendered() -> tuple[Obj, ...] | None:
    return tuple(render(BASE)) if kubectl() else None


def rendered() -> list[Obj] | None:
    cached = _rendered()
    return None if cached is None else copy.deepcopy(list(cached))


def kustomization() -> Obj:
    doc = yaml.safe_load((BASE / "kustomization.yaml").read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def written() -> list[Obj]:
    """The objects of the base's `resources:` files, as written (no kustomize applied)."""
    found: list[Obj] = []
    for name in kustomization()["resources"]:
        found.extend(documents((BASE / name).read_text(encoding="utf-8")))
    return found


def objects() -> list[Obj]:
    """The rendering where kubectl is installed, else the files as written."""
    return rendered() or written()


def one(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    """The single object of `kind` (and `name`)."""
    matches = [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"{len(matches)} objects of kind {kind} named {name}"
    return matches[0]
