"""SelfSubjectReview (`POST /apis/authentication.k8s.io/v1/selfsubjectreviews`): who am I.

The apiserver answers with the authenticated user's info, whatever the request body says
(`kubectl auth whoami -o json`); shape from kubernetes/kubernetes
`pkg/registry/authentication/selfsubjectreview/rest.go`: status.userInfo {username, uid, groups}.
"""

from __future__ import annotations

from typing import Any

from oncall_drill.kube_sim import errors
from oncall_drill.kube_sim.rbac import User
from oncall_drill.kube_sim.store import Obj, now_rfc3339

KIND = "SelfSubjectReview"
API_VERSION = "authentication.k8s.io/v1"


def self_subject_review(user: User, body: Any) -> Obj:
    """The review of the caller: the user that authenticated the request."""
    if body is not None and not isinstance(body, dict):
        raise errors.bad_request(f'{KIND} in version "v1" cannot be handled as a {KIND}')
    info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    return {
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": {"creationTimestamp": now_rfc3339()},
        "status": {"userInfo": info},
    }
