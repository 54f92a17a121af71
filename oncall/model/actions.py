"""The remediation actions a runbook may propose, and the parameters each one takes.

Runbooks (checklist/) propose actions; remediation/ carries them out. Both read the names and
parameter shapes from here, so a runbook that proposes an unknown action, or a parameter the
action does not take, is a lint error rather than a surprise at 3 a.m.

Parameter values in a runbook may be `{{ CEL }}` templates; their types are checked when the
proposal is made (after the template is evaluated), the key names when the runbook loads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ActionName = Literal["rebuild-pod", "set-degradation-level", "set-max-num-seqs"]


class ActionParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RebuildPodParams(ActionParams):
    """Delete one pod with a UID precondition; its controller creates a replacement."""

    pod: str = Field(min_length=1, description="Pod name.")
    namespace: str | None = Field(None, description="Namespace; default: kubernetes.namespace.")
    uid: str | None = Field(None, description="Expected pod UID (the precondition).")


class SetDegradationLevelParams(ActionParams):
    """Set the service's degradation level: 0 normal, 1 RAG off, 2 LLM off (FAQ), 3 static."""

    level: int = Field(ge=0, le=3, description="Target level, 0–3.")


class SetMaxNumSeqsParams(ActionParams):
    """Patch vLLM's `--max-num-seqs` in a Deployment's container args and follow the rollout."""

    deployment: str = Field(description="Deployment name.")
    value: int = Field(ge=1, le=65536, description="New --max-num-seqs.")
    container: str | None = Field(None, description="Container; default: the vLLM one.")
    namespace: str | None = Field(None, description="Namespace; default: kubernetes.namespace.")


ACTION_PARAMS: dict[str, type[ActionParams]] = {
    "rebuild-pod": RebuildPodParams,
    "set-degradation-level": SetDegradationLevelParams,
    "set-max-num-seqs": SetMaxNumSeqsParams,
}
