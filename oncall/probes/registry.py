"""Every probe by name. Probe modules are cheap to import: heavy clients load on first use."""

from __future__ import annotations

import functools
import importlib
from typing import Any

from oncall.probes.base import Probe

#: Modules that define probes; each exports `PROBES`, a tuple of `Probe`.
PROBE_MODULES = (
    "oncall.probes.prometheus",
    "oncall.probes.redis",
    "oncall.probes.vllm",
    "oncall.probes.kube",
    "oncall.probes.kube_logs",
    "oncall.probes.gpu",
)


@functools.cache
def all_probes() -> dict[str, Probe[Any]]:
    """name -> probe, for every probe oncall ships."""
    found: dict[str, Probe[Any]] = {}
    for module_name in PROBE_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:  # a missing module of ours is fine while building
                raise
            continue
        for probe in module.PROBES:
            if probe.name in found:
                raise RuntimeError(f"probe {probe.name!r} is defined twice")
            found[probe.name] = probe
    return found
