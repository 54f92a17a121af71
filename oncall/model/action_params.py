"""The remediation actions a runbook may propose, and the parameters each one takes.

Runbooks (checklist/) propose actions; remediation/ carries them out; the audit log checks the
names it records. Each reads the names and parameter shapes from here, the one layer below all
of them, so a runbook that proposes an unknown action, or a parameter the action does not take,
is a lint error rather than a surprise at 3 a.m.

`ACTION_PARAMS` is the registry's one list of names: `ActionName`, the runbook schema's action
list, the CLI's `remediate` subcommands, the audit's action names and the remediation registry
(oncall/remediation/registry.py, which loads what each action does from its module
oncall/remediation/actions/<name>.py) all derive from it. Adding a remediation is that module
and one line here, with its parameters model.

Parameter values in a runbook may be `{{ CEL }}` templates; their types are checked when the
proposal is made (after the template is evaluated), the key names when the runbook loads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from oncall.model.kube_names import DNS_LABEL, DNS_SUBDOMAIN, LABEL_MAX, NAME_MAX

#: What a number may look like when given as text: ASCII digits only. Python's int() and
#: pydantic read every Unicode decimal digit (`int("٣") == 3`): a level typed in Arabic-Indic
#: digits, or a look-alike pasted from a chat, must not become a level.
ASCII_INT = re.compile(r"[+-]?[0-9]+")


def ascii_int(value: str) -> int:
    """`int(value)` for ASCII digits only; ValueError for anything else (`٣`, `3.0`, `0x3`)."""
    text = value.strip()
    if not ASCII_INT.fullmatch(text):
        raise ValueError(f"not a number: {value!r} (digits 0-9 only)")
    return int(text)


class ActionParams(BaseModel):
    """The parameters of one action; required fields are the CLI's positional arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _ascii_numbers(cls, value: Any, info: Any) -> Any:
        field = cls.model_fields.get(info.field_name)
        if isinstance(value, str) and field is not None and field.annotation is int:
            return ascii_int(value)
        return value


class RebuildPodParams(ActionParams):
    """Evict one pod (UID precondition, PDBs honoured); its controller creates a replacement."""

    # A Kubernetes object name, as the API server checks it: the name is put in the eviction's
    # URL path (`/pods/NAME/eviction`) and comes from an alert's labels through a runbook; the
    # namespace too (`/namespaces/NS/…`), as a DNS label.
    pod: str = Field(
        min_length=1, max_length=NAME_MAX, pattern=DNS_SUBDOMAIN, description="A pod's name."
    )
    namespace: str | None = Field(
        None, min_length=1, max_length=LABEL_MAX, pattern=DNS_LABEL,
        description="Namespace; default: kubernetes.namespace.",
    )  # fmt: skip
    uid: str | None = Field(None, description="Expected pod UID (the precondition).")
    node: str | None = Field(
        None, min_length=1, max_length=NAME_MAX, pattern=DNS_SUBDOMAIN,
        description="The node telemetry places the pod on; refused if the API says otherwise.",
    )  # fmt: skip


class SetDegradationLevelParams(ActionParams):
    """Set the service's degradation level: 0 normal, 1 RAG off, 2 LLM off (FAQ), 3 static."""

    level: int = Field(ge=0, le=3, description="Target level, 0–3.")


class SetMaxNumSeqsParams(ActionParams):
    """Patch vLLM's `--max-num-seqs` in a Deployment's container args and follow the rollout."""

    deployment: str = Field(
        min_length=1, max_length=NAME_MAX, pattern=DNS_SUBDOMAIN,
        description="A Deployment's name.",
    )  # fmt: skip
    value: int = Field(ge=1, le=65536, description="New --max-num-seqs.")
    # Like the namespace, a name the API server checks (a DNS label): it selects the container
    # whose args the JSON patch's paths point into, and may come from an alert's labels.
    container: str | None = Field(
        None, min_length=1, max_length=LABEL_MAX, pattern=DNS_LABEL,
        description="Container; default: the vLLM one.",
    )  # fmt: skip
    namespace: str | None = Field(
        None, min_length=1, max_length=LABEL_MAX, pattern=DNS_LABEL,
        description="Namespace; default: kubernetes.namespace.",
    )  # fmt: skip
    change_both: bool | None = Field(
        None,
        description="Also lower --max-num-active-seqs to the new value when it is above it "
        "(vLLM refuses to start with --max-num-active-seqs above --max-num-seqs).",
    )


class ScaleDeploymentParams(ActionParams):
    """Set a Deployment's replicas: up (a node must take each new pod), or down by one."""

    deployment: str = Field(
        min_length=1, max_length=NAME_MAX, pattern=DNS_SUBDOMAIN,
        description="A Deployment's name.",
    )  # fmt: skip
    replicas: int = Field(
        ge=1, le=1000, description="New replica count: above the current one, or one below it."
    )
    namespace: str | None = Field(
        None, min_length=1, max_length=LABEL_MAX, pattern=DNS_LABEL,
        description="Namespace; default: kubernetes.namespace.",
    )  # fmt: skip


#: A silence's comment or an acknowledgement's note: one screen line's worth, at most.
NOTE_MAX_CHARS = 500
#: Characters a note may not hold: C0/C1 controls (escape sequences that would repaint another
#: operator's terminal), DEL, and the Unicode line and bidi controls that make text read
#: differently than it is stored.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
#: An Alertmanager silence id: a UUID (it is put in the URL path, so nothing else is).
SILENCE_ID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


def bounded_note(value: str) -> str:
    """A comment or note as it is stored: stripped, one line, no control characters, bounded."""
    text = value.strip()
    if _CONTROL.search(text):
        raise ValueError("control characters (escape sequences, line breaks) are not allowed")
    if len(text) > NOTE_MAX_CHARS:
        raise ValueError(f"at most {NOTE_MAX_CHARS} characters, not {len(text)}")
    return text


class SilenceParams(ActionParams):
    """Silence the alerts some label matchers select, in Alertmanager, for a while."""

    matchers: str = Field(
        min_length=1,
        max_length=2000,
        description='Prometheus label matchers, e.g. {alertname="KubePodNotReady", pod="vllm-0"}.',
    )
    duration: str = Field("2h", description="How long: 30m, 2h, 1d (whole units, at most 30d).")
    comment: str = Field("", description="Why (required): shown to everyone who sees the silence.")

    @field_validator("comment")
    @classmethod
    def _comment(cls, value: str) -> str:
        return bounded_note(value)


class SilenceExpireParams(ActionParams):
    """End one Alertmanager silence now (amtool silence expire ID)."""

    silence_id: str = Field(pattern=SILENCE_ID, description="The silence's id (a UUID).")


class AcknowledgeParams(ActionParams):
    """ "I am on it": acknowledge a firing alert team-wide (kept in Redis; silences nothing)."""

    alert: str = Field(
        min_length=1, max_length=200, pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$",
        description="The alert's name.",
    )  # fmt: skip
    note: str = Field("", description="What you are doing about it, for the others.")

    @field_validator("note")
    @classmethod
    def _note(cls, value: str) -> str:
        return bounded_note(value)


ACTION_PARAMS: dict[str, type[ActionParams]] = {
    "rebuild-pod": RebuildPodParams,
    "set-degradation-level": SetDegradationLevelParams,
    "set-max-num-seqs": SetMaxNumSeqsParams,
    "scale-deployment": ScaleDeploymentParams,
    "silence": SilenceParams,
    "silence-expire": SilenceExpireParams,
    "acknowledge": AcknowledgeParams,
}

if TYPE_CHECKING:
    ActionName = str
else:

    def __getattr__(name: str) -> Any:
        # `ActionName`: a Literal of the names above, for pydantic (validation messages, the
        # schema's enum), made when asked for, so an action registered later (a test's, by
        # oncall.remediation.registry.register) is in it too.
        if name == "ActionName":
            return Literal[tuple(ACTION_PARAMS)]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
