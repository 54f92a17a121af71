"""Validation the apiserver does before it stores an object (the parts the drill can trip).

Decoding errors (a MicroTime without six fractional digits, a wrong JSON type) are 400
BadRequest; field validation errors are 422 Invalid with the apiserver's `<Kind> "<name>" is
invalid: <field>: Invalid value: ...` message.
"""

from __future__ import annotations

import re
from typing import Any

from oncall_drill.kube_sim.errors import bad_request, invalid
from oncall_drill.kube_sim.hpa import validate_hpa
from oncall_drill.kube_sim.resources import DEPLOYMENTS, EVENTS, HPAS, LEASES, ResourceType
from oncall_drill.kube_sim.selectors import labels_match, selector_from_label_selector
from oncall_drill.kube_sim.store import Obj

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# metav1.MicroTime is parsed with layout 2006-01-02T15:04:05.000000Z07:00.
_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
_MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"


def _go_repr(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def validate(rt: ResourceType, obj: Obj) -> None:
    """Raise the apiserver's 400/422 for an object that could not be stored."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}')
    name = str(meta.get("name") or "")
    if not name:
        raise invalid(
            rt, "", [("metadata.name", "Required value: name or generateName is required")]
        )
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise invalid(
            rt,
            name,
            [
                (
                    "metadata.name",
                    f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                    "lower case alphanumeric characters, '-' or '.', and must start and end "
                    "with an alphanumeric character",
                )
            ],
        )
    if rt is LEASES:
        _validate_lease(obj)
    elif rt is DEPLOYMENTS:
        _validate_deployment(rt, name, obj)
    elif rt is HPAS:
        validate_hpa(rt, name, obj)
    elif rt is EVENTS and not isinstance(obj.get("involvedObject"), dict):
        raise invalid(rt, name, [("involvedObject", "Required value")])


def _validate_lease(obj: Obj) -> None:
    spec = obj.get("spec") or {}
    for key in ("acquireTime", "renewTime"):
        value = spec.get(key)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.match(value)):
            raise bad_request(
                f'Lease in version "v1" cannot be handled as a Lease: parsing time '
                f'{_go_repr(value)} as "{_MICRO_LAYOUT}": cannot parse {_go_repr(value)} '
                f'as "{_MICRO_LAYOUT}"'
            )
    for key in ("leaseDurationSeconds", "leaseTransitions"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise bad_request(
                f'Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal '
                f"{type(value).__name__} into Go struct field LeaseSpec.spec.{key} of type int32"
            )


def _validate_deployment(rt: ResourceType, name: str, obj: Obj) -> None:
    causes: list[tuple[str, str]] = []
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        causes.append(
            (
                "spec.replicas",
                f"Invalid value: {_go_repr(replicas)}: must be greater than or equal to 0",
            )
        )
    template = spec.get("template") or {}
    containers = (template.get("spec") or {}).get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(("spec.template.spec.containers", "Required value"))
        containers = []
    for i, c in enumerate(containers):
        field = f"spec.template.spec.containers[{i}]"
        if not isinstance(c, dict):
            causes.append((field, "Invalid value: must be an object"))
            continue
        if not isinstance(c.get("name"), str) or not c.get("name"):
            causes.append((f"{field}.name", "Required value"))
        if not isinstance(c.get("image"), str) or not c.get("image"):
            causes.append((f"{field}.image", "Required value"))
        for key in ("args", "command"):
            value = c.get(key)
            if value is not None and (
                not isinstance(value, list) or not all(isinstance(a, str) for a in value)
            ):
                causes.append(
                    (f"{field}.{key}", f"Invalid value: {value!r}: must be a list of strings")
                )
    selector = spec.get("selector")
    labels = (template.get("metadata") or {}).get("labels") or {}
    if not isinstance(selector, dict):
        causes.append(("spec.selector", "Required value"))
    elif not labels_match(selector_from_label_selector(selector), labels):
        causes.append(
            (
                "spec.template.metadata.labels",
                f"Invalid value: {labels!r}: `selector` does not match template `labels`",
            )
        )
    if causes:
        raise invalid(rt, name, causes)
