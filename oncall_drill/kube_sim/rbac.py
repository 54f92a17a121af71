"""Users of the simulated cluster, told apart by bearer token, and what each may do.

Three users, like the contexts of the generated kubeconfig: the operator may do everything the
simulator serves; the peer is a second operator (another person: the two-person rule's
approver in drills); the read-only user may only get and list (the apiserver answers 403).
SelfSubjectReview answers each one's name and groups.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from oncall_drill.kube_sim.errors import forbidden, unauthorized
from oncall_drill.kube_sim.resources import ResourceType

READ_ONLY_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True)
class User:
    """An authenticated identity; `verbs` None means every verb."""

    name: str
    token: str
    verbs: frozenset[str] | None = None
    groups: tuple[str, ...] = ("system:authenticated",)
    uid: str = ""

    def may(self, verb: str) -> bool:
        return self.verbs is None or verb in self.verbs


_OPERATORS = ("oncall:operators", "system:authenticated")
_READERS = ("system:serviceaccounts", "system:serviceaccounts:ai", "system:authenticated")


def _token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Users:
    """The operator, the peer operator and the read-only user of one simulator instance."""

    operator: User = field(
        default_factory=lambda: User("oncall-operator", _token(), groups=_OPERATORS)
    )
    read_only: User = field(
        default_factory=lambda: User(
            "system:serviceaccount:ai:oncall-readonly", _token(), READ_ONLY_VERBS, _READERS
        )
    )
    peer: User = field(default_factory=lambda: User("oncall-peer", _token(), groups=_OPERATORS))

    def all(self) -> tuple[User, ...]:
        return (self.operator, self.read_only, self.peer)

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
