"""The probe registry: `find_probe` (one family's modules) finds what `all_probes` has."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

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


def test_a_found_probe_has_its_parameters_model_built_and_checking() -> None:
    """`ProbeParams` models are built on first use; `find_probe` builds the one it hands out
    (under a lock, for runbooks loading in threads), so validating with it never runs on the
    base model's schema, where every parameter would be an unknown key."""
    for name in sorted(all_probes()):
        probe = find_probe(name)
        assert probe is not None
        assert probe.params.__pydantic_complete__, name
    pods = find_probe("kube.pods")
    assert pods is not None
    assert pods.params.model_validate({"selector": "app=vllm"}).selector == "app=vllm"
    with pytest.raises(ValidationError) as caught:
        pods.params.model_validate({"selector": "app=vllm", "selectr": "x"})
    assert [e["loc"] for e in caught.value.errors()] == [("selectr",)]
