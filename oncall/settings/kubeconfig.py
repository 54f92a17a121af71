"""A kubeconfig as the settings see it: the contexts it names and the API server of one.

Read here as plain YAML (bounded, like every file oncall reads), not through the Kubernetes
client: the settings loader checks that a context's `kubernetes.context` exists in its
kubeconfig (a located settings error rather than a failure at the first probe), and the
confirm modal and `oncall remediate` name the cluster's API server, without the client's
imports. The file is picked as kubectl picks it: the setting, else the first file of
$KUBECONFIG, else ~/.kube/config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oncall.settings.model import KubernetesSettings
from oncall.settings.yaml_marks import load_marked_yaml


@dataclass(frozen=True)
class KubeTarget:
    """Which cluster a context's Kubernetes settings point at, as far as the file says."""

    kubeconfig: str
    #: The kubeconfig context: the setting, else the file's current-context; None if neither.
    context: str | None
    #: The API server of that context's cluster; None when the file does not say.
    server: str | None

    @property
    def label(self) -> str:
        """`kind-eu (https://127.0.0.1:6443)`, for the confirm modal and `oncall remediate`."""
        return f"{self.context or 'no context'} ({self.server or 'API server unknown'})"


def kubeconfig_path(settings: KubernetesSettings, environ: Mapping[str, str]) -> Path:
    if settings.kubeconfig is not None:
        return settings.kubeconfig.expanduser()
    first = environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(first).expanduser() if first else Path("~/.kube/config").expanduser()


def read_kubeconfig(path: Path) -> dict[str, Any] | None:
    """The file's mapping; None when it is missing or not a readable kubeconfig (the client
    reports that itself, with the reason, when it is used)."""
    if not path.is_file():
        return None
    document, problems = load_marked_yaml(path)
    return None if problems else document.data


def _named(items: Any) -> dict[str, Mapping[str, Any]]:
    """A kubeconfig list of `{name, context|cluster}` entries by name; junk left out."""
    found: dict[str, Mapping[str, Any]] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            found[item["name"]] = item
    return found


def context_names(data: Mapping[str, Any]) -> list[str]:
    return list(_named(data.get("contexts")))


def kube_target(
    settings: KubernetesSettings, environ: Mapping[str, str] | None = None
) -> KubeTarget:
    """The kube context and API server the settings lead to (blocking: reads a file)."""
    path = kubeconfig_path(settings, os.environ if environ is None else environ)
    data = read_kubeconfig(path) or {}
    context = settings.context
    if context is None and isinstance(data.get("current-context"), str):
        context = data["current-context"]
    server: str | None = None
    entry = _named(data.get("contexts")).get(context or "", {}).get("context")
    if isinstance(entry, Mapping):
        cluster = _named(data.get("clusters")).get(str(entry.get("cluster")), {}).get("cluster")
        if isinstance(cluster, Mapping) and isinstance(cluster.get("server"), str):
            server = cluster["server"]
    return KubeTarget(str(path), context, server)
