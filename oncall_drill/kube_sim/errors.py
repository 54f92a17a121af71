"""metav1.Status failures with the apiserver's exact reasons, codes and message formats.

Message formats follow k8s.io/apimachinery/pkg/api/errors (NewNotFound, NewConflict,
NewAlreadyExists, NewForbidden, NewInvalid, NewGenericServerResponse) and the apiserver's
rest.BeforeDelete / registry store texts; see reference/samples/k8s_status_errors_constructed.json.
"""

from __future__ import annotations

from typing import Any

from oncall_drill.kube_sim.resources import ResourceType

OPTIMISTIC_LOCK_MSG = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class ApiError(Exception):
    """A request the simulated apiserver answers with a metav1.Status failure."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        #: A continue token for the Status' ListMeta (410 Expired on a list).
        self.list_continue: str | None = None

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {"continue": self.list_continue} if self.list_continue else {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(rt: ResourceType, name: str = "") -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    return details


def success_status(rt: ResourceType, name: str, uid: str) -> dict[str, Any]:
    """What a delete of a non-pod object answers."""
    details = _details(rt, name)
    details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.qualified} "{name}" not found', _details(rt, name))


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed() -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {},
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json-patch+json, application/merge-patch+json, "
        f"application/strategic-merge-patch+json (got {content_type!r})",
    )


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{rt.qualified} "{name}" already exists', _details(rt, name)
    )


def conflict_modified(rt: ResourceType, name: str) -> ApiError:
    """A write carrying a stale resourceVersion (registry store OptimisticLockErrorMsg)."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": {OPTIMISTIC_LOCK_MSG}',
        _details(rt, name),
    )


def conflict_uid_precondition(rt: ResourceType, name: str, want: str, have: str) -> ApiError:
    """rest.BeforeDelete's early UID check; it puts the *Kind* where the resource usually goes."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.kind} "{name}": the UID in the precondition '
        f"({want}) does not match the UID in record ({have}). "
        "The object might have been deleted and then recreated",
        {"name": name, "kind": rt.kind},
    )


def conflict_rv_precondition(
    rt: ResourceType, namespace: str, name: str, want: str, have: str
) -> ApiError:
    """The storage layer's resourceVersion precondition failure on delete."""
    key = (
        f"/registry/{rt.plural}/{namespace}/{name}"
        if namespace
        else f"/registry/{rt.plural}/{name}"
    )
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": StorageError: invalid object, '
        f"Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
        f"ResourceVersion in precondition: {want}, ResourceVersion in object meta: {have}",
        _details(rt, name),
    )


def forbidden(rt: ResourceType, name: str, user: str, verb: str, namespace: str | None) -> ApiError:
    """RBAC denial (responsewriters.forbiddenMessage + errors.NewForbidden)."""
    subject = f'{rt.qualified} "{name}"' if name else rt.qualified
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{rt.plural}" '
        f'in API group "{rt.group}" {scope}'
    )
    return ApiError(403, "Forbidden", message, _details(rt, name))


def json_patch_failed() -> ApiError:
    """A JSON patch that does not apply (a failing `test`, a missing path).

    The apiserver wraps the json-patch error with NewGenericServerResponse(422); live servers
    answer the generic text with empty details, so the client cannot tell why from the body.
    """
    return ApiError(
        422, "Invalid", "the server rejected our request due to an error in our request", {}
    )


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """errors.NewInvalid: `Deployment.apps "x" is invalid: <field>: <detail>, ...`."""
    qualified_kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    joined = ", ".join(f"{field}: {detail}" for field, detail in causes)
    if len(causes) > 1:
        joined = f"[{joined}]"
    details = _details(rt, name)
    details["kind"] = rt.kind
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": detail, "field": field}
        for field, detail in causes
    ]
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {joined}', details)
