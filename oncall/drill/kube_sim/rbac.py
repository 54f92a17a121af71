"""Users of the simulated cluster, told apart by bearer token, and what each may do.

Two profiles, like the two contexts of the generated kubeconfig: the operator may do everything the
simulator serves; the read-only user may only get and list (the apiserver answers 403 Forbidden).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from oncall.drill.kube_sim.errors import forbidden, unauthorized
from oncall.drill.kube_sim.resources import ResourceType

READ_ONLY_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True)
class User:
    """An authenticated identity; `verbs` None means every verb."""

    name: str
    token: str
    verbs: frozenset[str] | None = None

    def may(self, verb: str) -> bool:
        return self.verbs is None or verb in self.verbs


def _token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Users:
    """The operator and the read-only user of one simulator instance."""

    operator: User = field(default_factory=lambda: User("oncall-operator", _token()))
    read_only: User = field(
        default_factory=lambda: User(
            "system:serviceaccount:ai:oncall-readonly", _token(), READ_ONLY_VERBS
        )
    )

    def all(self) -> tuple[User, ...]:
        return (self.operator, self.read_only)

    def authenticate(self, authorization: str | None) -> User:
        """The user behind an `Authorization: Bearer <token>` header (401 if none)."""
        if authorization and authorization.startswith("Bearer "):
            token = authorization.removeprefix("Bearer ").strip()
            for user in self.all():
                if secrets.compare_digest(user.token, token):
                    return user
        raise unauthorized()


def authorize(user: User, verb: str, rt: ResourceType, namespace: str | None, name: str) -> None:
    """Raise the apiserver's 403 when user may not do verb on the resource."""
    if not user.may(verb):
        raise forbidden(rt, name, user.name, verb, namespace)
