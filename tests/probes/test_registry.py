"""The probe registry: `find_probe` (one family's modules) finds what `all_probes` has."""

from __future__ import annotations

from oncall.probes.registry import FAMILIES, _module_probes, all_probes, find_probe


def test_every_probe_is_found_through_its_family() -> None:
    """A probe defined in a module listed under another family than its name's prefix would
    be unknown to a runbook's step (the loader asks `find_probe`) while the schema lists it."""
    for family, modules in FAMILIES.items():
        for module in modules:
            names = [p.name for p in _module_probes(module)]
            assert names, f"{module} defines no probe"
            assert all(name.partition(".")[0] == family for name in names), (module, names)
    assert {name: find_probe(name) for name in all_probes()} == all_probes()


def test_an_unknown_name_or_family_finds_nothing() -> None:
    assert find_probe("kube.pod") is None
    assert find_probe("nosuch.query") is None
    assert find_probe("") is None
