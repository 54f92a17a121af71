"""Who the operator is, from authorities: the Kubernetes API and the OS account.

- `kube_identity`: `SelfSubjectReview` (`POST /apis/authentication.k8s.io/v1/selfsubjectreviews`,
  `kubectl auth whoami -o json`): the username and groups the apiserver authenticated the
  kubeconfig's credentials as. This is the identity that counts for the two-person rule.
- `os_account`: the account of the process's real uid (`getuid()` → the passwd entry).

`$USER`, `$LOGNAME` and `getpass.getuser()` are whatever the environment says: display only.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import Any, Protocol

from oncall.errors import BackendError


@dataclass(frozen=True)
class KubeIdentity:
    """The user the Kubernetes API says we are."""

    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""


def os_account() -> dict[str, str | int]:
    """The real uid's account name and number (`id -un`, `id -u`), never the environment's."""
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:  # no passwd entry (some containers): the number is the account
        name = f"uid:{uid}"
    return {"os_user": name, "uid": uid}


def display_user() -> str | None:
    """What the environment calls the user ($USER, $LOGNAME): shown, never trusted."""
    return os.environ.get("USER") or os.environ.get("LOGNAME") or None


class Reviewer(Protocol):
    """What `kube_identity` needs: oncall.backends.kube_write.KubeWriter.self_subject_review."""

    async def self_subject_review(self) -> dict[str, Any]: ...


async def kube_identity(kube: Reviewer) -> KubeIdentity:
    """`kubectl auth whoami`: raises BackendError when the server cannot say."""
    review = await kube.self_subject_review()
    info = (review.get("status") or {}).get("userInfo") or {}
    username = info.get("username")
    if not isinstance(username, str) or not username:
        raise BackendError("kubernetes", "SelfSubjectReview", "bad payload", "no username")
    groups = tuple(str(g) for g in info.get("groups") or ())
    return KubeIdentity(username, groups, str(info.get("uid") or ""))
