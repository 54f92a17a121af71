"""Every probe by name, and one probe by name importing only the modules of its family.

A probe's name is `family.what` (`kube.pods`, `vllm.rates`); `FAMILIES` names the modules that
define each family's probes. `find_probe` imports those modules only: a fresh `oncall check`
of a Prometheus-only runbook does not import the vLLM probes (prometheus_client's parser),
the Kubernetes ones (the vLLM argument rules) or the GPU ones (docs/PERFORMANCE.md).
`all_probes` imports every module (the runbook schema, an unknown name's suggestions).
"""

from __future__ import annotations

import functools
import importlib
import threading
from typing import Any

from oncall.probes.base import Probe

#: family (the part of a probe's name before the first ".") -> the modules defining its
#: probes; each exports `PROBES`, a tuple of `Probe`. A test checks that every probe of a
#: module is named for the family it is listed under, so `find_probe` finds what
#: `all_probes` has.
FAMILIES: dict[str, tuple[str, ...]] = {
    "prometheus": ("oncall.probes.prometheus",),
    "redis": ("oncall.probes.redis",),
    "vllm": ("oncall.probes.vllm",),
    "kube": ("oncall.probes.kube", "oncall.probes.kube_logs"),
    "gpu": ("oncall.probes.gpu",),
}

#: Every module that defines probes, in the order `all_probes` reads them.
PROBE_MODULES = tuple(module for modules in FAMILIES.values() for module in modules)


@functools.cache
def _module_probes(module_name: str) -> tuple[Probe[Any], ...]:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:  # a missing module of ours is fine while building
            raise
        return ()
    probes: tuple[Probe[Any], ...] = module.PROBES
    return probes


def _collect(module_names: tuple[str, ...]) -> dict[str, Probe[Any]]:
    found: dict[str, Probe[Any]] = {}
    for module_name in module_names:
        for probe in _module_probes(module_name):
            if probe.name in found:
                raise RuntimeError(f"probe {probe.name!r} is defined twice")
            found[probe.name] = probe
    return found


@functools.cache
def family_probes(family: str) -> dict[str, Probe[Any]]:
    """name -> probe, for the probes of one family (none for a family oncall lacks)."""
    return _collect(FAMILIES.get(family, ()))


def find_probe(name: str) -> Probe[Any] | None:
    """The probe called `name`, importing only its family's modules; None if there is none.

    Its parameters model is built here (`ProbeParams` defers the build: a runbook pays for
    the models of the probes it names, not for its families' every one), under a lock:
    runbooks load in worker threads, and before pydantic 2.14 two threads completing one
    deferred model could validate with the base model's schema meanwhile (pydantic#11849),
    where every parameter is an unknown key."""
    probe = family_probes(name.partition(".")[0]).get(name)
    if probe is not None and not probe.params.__pydantic_complete__:
        with _BUILDING:
            probe.params.model_rebuild(_parent_namespace_depth=0)  # its module's names only
    return probe


_BUILDING = threading.Lock()


@functools.cache
def all_probes() -> dict[str, Probe[Any]]:
    """name -> probe, for every probe oncall ships."""
    return _collect(PROBE_MODULES)
