"""The settings of oncall: one pydantic model per section of `oncall.yaml` (docs/operating.md).

Every model forbids unknown keys, so a typo is an error with its file:line:col rather than a
setting silently ignored. Secrets are `SecretStr` and never printed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    create_model,
    field_validator,
)

from oncall.model.matchers import MatcherError, parse_selection
from oncall.settings.durations import Duration
from oncall.settings.serve import ServeSettings
from oncall.settings.yaml_marks import YamlLimits

_DEFAULT_LIMITS = YamlLimits()
_CONTEXT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def _checked_url(schemes: tuple[str, ...]) -> AfterValidator:
    """A URL checked when the settings load, so that a bad port, a bad IPv6 literal or a
    wrong scheme is a located settings problem instead of a traceback inside a client.
    Messages never repeat the URL: it may hold a password."""

    def check(value: str) -> str:
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - reading it is the check: ValueError on a bad port
        except ValueError as exc:
            raise ValueError(f"not a valid URL: {exc}") from None
        if parts.scheme not in schemes:
            shown = parts.scheme or "none"
            raise ValueError(f"URL scheme must be {' or '.join(schemes)}, not {shown}")
        if not parts.hostname:
            raise ValueError("URL has no host")
        return value

    return AfterValidator(check)


def empty_list() -> list[Any]:
    """`default_factory` of list fields. pydantic reads a factory's signature; for the
    builtin `list` that means parsing its text signature with the tokenize module, whose
    first use compiles its big regex (≈ 5-10 ms of a fresh process's start, once)."""
    return []


HttpUrl = Annotated[str, _checked_url(("http", "https"))]
RedisUrl = Annotated[str, _checked_url(("redis", "rediss"))]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ContextSettings(Section):
    """Which environment this is; shown in the banner, and production looks different."""

    name: str = Field("default", description="Label of this environment, e.g. prod-eu or drill.")
    production: bool = Field(False, description="Show the production banner and ask more.")


#: An HTTP header name (RFC 9110 token); values may not break the header line.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _checked_headers(headers: dict[str, SecretStr]) -> dict[str, SecretStr]:
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an HTTP header name")
        if any(char in value.get_secret_value() for char in "\r\n\0"):
            raise ValueError(f"the value of header {name} holds a line break")  # never the value
    return headers


class PrometheusSettings(Section):
    url: HttpUrl = Field(
        "http://127.0.0.1:9090",
        description="Base URL of the Prometheus HTTP API, with its path prefix if it has one "
        "(Mimir: http://mimir/prometheus); every API path is joined below it.",
    )
    timeout: Duration = Field(5.0, description="Per-request timeout, connection included.")
    bearer_token: SecretStr | None = Field(None, description="Sent as Authorization: Bearer.")
    headers: Annotated[dict[str, SecretStr], AfterValidator(_checked_headers)] = Field(
        default_factory=dict,
        description="Extra headers sent with every request, e.g. {X-Scope-OrgID: tenant} for "
        "Mimir; values are secrets (masked in config show, never printed).",
    )


class AlertmanagerSettings(Section):
    """The team's Alertmanager (API v2): silences and inhibitions on the board. Optional: with
    no `url` the board has no silence column and nothing asks an Alertmanager."""

    url: HttpUrl | None = Field(
        None, description="Base URL of the Alertmanager (API v2); null: none is asked."
    )
    timeout: Duration = Field(3.0, description="Per-request timeout, connection included.")
    bearer_token: SecretStr | None = Field(None, description="Sent as Authorization: Bearer.")
    silences_refresh: Duration = Field(
        60.0,
        description="The silences list is read when an alert names a silence not seen yet, "
        "and at most this long after the last read (a silence's end or comment changed).",
    )


class KubernetesSettings(Section):
    kubeconfig: Path | None = Field(None, description="kubeconfig file; default as kubectl.")
    context: str | None = Field(None, description="kubeconfig context; default: current.")
    namespace: str = Field("default", description="Namespace of the inference service.")
    timeout: Duration = Field(5.0, description="Per-request timeout.")


class RedisSettings(Section):
    url: RedisUrl = Field(
        "redis://127.0.0.1:6379/0", description="redis:// URL of the service Redis."
    )
    password: SecretStr | None = Field(None, description="Password, if not in the URL.")
    timeout: Duration = Field(2.0, description="Per-command timeout, connection included.")


class VllmSettings(Section):
    urls: list[HttpUrl] = Field(
        default_factory=lambda: ["http://127.0.0.1:8000"],
        description="Base URLs of vLLM servers (used when not discovered through Kubernetes).",
    )
    api_key: SecretStr | None = Field(None, description="Sent as Authorization: Bearer.")
    timeout: Duration = Field(3.0, description="Per-request timeout.")


class GpuSettings(Section):
    source: Literal["auto", "nvml", "dcgm"] = Field(
        "auto", description="NVML on this node, DCGM exporter metrics, or whichever answers."
    )
    timeout: Duration = Field(2.0, description="Per-query timeout.")


class AlertsSettings(Section):
    packs: list[str] = Field(
        default_factory=lambda: ["ai-service"], description="Alert packs to load."
    )
    dirs: list[Path] = Field(default_factory=empty_list, description="Extra rule-file folders.")
    source: Literal["auto", "prometheus", "local"] = Field(
        "auto", description="Where alert states come from; auto picks per rule."
    )
    refresh: Duration = Field(5.0, description="How often alert states are refreshed.")
    for_scale: float = Field(
        1.0,
        gt=0,
        le=1000,
        allow_inf_nan=False,
        description="Multiplier on `for` durations and rule windows (drills).",
    )
    files: list[str] = Field(
        default_factory=empty_list,
        description="Rule files and folders named directly (paths or globs); plain rule files "
        "or PrometheusRule objects.",
    )
    from_prometheus: str = Field(
        "all",
        description="Also list the alerting rules Prometheus evaluates: all, none, or label "
        'matchers such as {severity=~"page|critical"}.',
    )

    prometheus_rules: Literal["none", "cluster"] = Field(
        "none",
        description="cluster: also load the PrometheusRule objects of the Kubernetes cluster "
        "(read-only: get, list on prometheusrules.monitoring.coreos.com).",
    )
    prometheus_rules_namespace: str | None = Field(
        None, description="Namespace of those PrometheusRule objects; null: all namespaces."
    )
    prometheus_rules_selector: str = Field(
        "", description="Label selector of those PrometheusRule objects, e.g. role=alert-rules."
    )
    ack_ttl: Duration = Field(
        14400.0,
        gt=0,
        description="How long an acknowledgement (`a`, `oncall ack`) lasts unless its alert "
        "resolves first.",
    )
    liveness: Duration = Field(
        300.0,
        ge=0,
        description="How often each rule is checked for whether it can fire here (its metrics "
        "and label values exist, its rate windows hold two scrapes): a few batched queries "
        "for all rules; 0: never.",
    )

    @field_validator("from_prometheus")
    @classmethod
    def _selection(cls, value: str) -> str:
        if value.strip() not in ("all", "none"):
            try:
                parse_selection(value, words=False)
            except MatcherError as exc:
                raise ValueError(f"all, none or label matchers: {exc}") from exc
        return value


class RunbooksSettings(Section):
    dirs: list[Path] = Field(
        default_factory=empty_list, description="Extra runbook folders, searched before built-ins."
    )
    vars: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Override runbook vars of the same name (a drill sets rate_window: 20s).",
    )
    auto_run: Literal["firing", "pending", "off"] = Field(
        "firing",
        description="The app starts an alert's checklist by itself when it fires; pending: "
        "also when it goes pending; off: only when asked.",
    )
    auto_run_every: Duration = Field(
        60.0, description="The app starts an alert's checklist by itself at most this often."
    )


class DegradationSettings(Section):
    store: Literal["redis", "configmap"] = Field(
        "redis", description="Where the service reads its degradation level."
    )
    redis_key: str = Field("ai-gateway:degradation-level", description="Key when store=redis.")
    configmap: str = Field("ai-gateway-flags", description="ConfigMap when store=configmap.")
    configmap_key: str = Field("degradation-level", description="Key in that ConfigMap.")


class AuditSettings(Section):
    path: Path = Field(
        Path("~/.local/state/oncall/audit.jsonl"), description="Append-only hash-chained log."
    )
    redis_stream: str | None = Field(
        "oncall:audit", description="Team-wide copy as a Redis Stream; null to disable."
    )
    kube_events: bool = Field(True, description="Also record a Kubernetes Event on the target.")
    local_only: bool = Field(
        False,
        description=(
            "Let changes run without the team Stream copy (redis_stream null or unwritable); "
            "every preview and record then says so. Off: no Stream copy, no change."
        ),
    )


class IncidentsSettings(Section):
    """How alert instances are grouped into incidents (docs/architecture.md §3)."""

    window: Duration = Field(
        300.0,
        gt=0,
        description="Alerts firing within this time of each other and failing on the same "
        "target are one incident.",
    )
    close_after: Duration = Field(
        900.0, ge=0, description="An incident closes when all its alerts have resolved this long."
    )
    retention: Duration = Field(
        30 * 86400.0, gt=0, description="How long Redis keeps an incident after its last change."
    )


class GuardsSettings(Section):
    rate_limit_actions: int = Field(
        3, ge=1, le=10_000, description="Actions allowed per target per window."
    )
    rate_limit_window: Duration = Field(600.0, description="Window of the rate limit.")
    breaker_failures: int = Field(
        3, ge=1, le=10_000, description="Failures that open the circuit breaker."
    )
    breaker_cooldown: Duration = Field(900.0, description="How long an open breaker blocks.")
    lease_duration: Duration = Field(60.0, description="Kubernetes Lease held per target.")
    two_person: list[str] = Field(
        default_factory=empty_list, description="Actions that need a second person's approval."
    )
    namespaces: list[str] = Field(
        default_factory=empty_list,
        description=(
            "Namespaces a remediation may act in (a pod named by telemetry included); "
            "empty: kubernetes.namespace only."
        ),
    )
    managed_workloads: Literal["warn", "refuse"] = Field(
        "warn",
        description=(
            "A patch to a Deployment that an operator, Helm release, Argo CD or Flux re-applies: "
            "warn (the preview says it will be reverted and where to change it) or refuse."
        ),
    )
    revert_watch: Duration = Field(
        300.0,
        ge=0,
        le=3600,
        description=(
            "After a verified change to a managed Deployment, how long to keep watching for "
            "its revert (recorded as `reverted`); 0: off."
        ),
    )
    scale_with_hpa: Literal["refuse", "raise-min"] = Field(
        "refuse",
        description=(
            "When a HorizontalPodAutoscaler scales the Deployment scale-deployment targets: "
            "refuse, or raise-min (scale up by raising the HPA's minReplicas, never fighting it)."
        ),
    )
    capacity_kv_threshold: float = Field(
        0.9, gt=0, le=1, allow_inf_nan=False,
        description=(
            "KV-cache usage (0-1) at or above which a preempting vLLM replica counts as "
            "saturated in the capacity preflight."
        ),
    )  # fmt: skip
    capacity_window: Duration = Field(
        120.0, description="Window over which the capacity preflight counts preemptions."
    )
    approval_redis_url: RedisUrl | None = Field(
        None,
        description=(
            "redis:// URL (with the approvers' user, deploy/redis/users.acl oncall-approver) "
            "that `remediate approve` writes approvals with; null: redis.url."
        ),
    )
    approval_redis_password: SecretStr | None = Field(
        None, description="Password of approval_redis_url's user, if not in the URL."
    )

    @field_validator("two_person")
    @classmethod
    def _known_actions(cls, names: list[str]) -> list[str]:
        # A typo ("set-degradation-levl") would silently never apply: name the real actions.
        from oncall.model.action_params import ACTION_PARAMS

        unknown = [n for n in names if n not in ACTION_PARAMS]
        if unknown:
            known = ", ".join(ACTION_PARAMS)
            raise ValueError(f"unknown action(s) {', '.join(unknown)}; the actions are: {known}")
        return names


class LimitsSettings(Section):
    """Bounds on what oncall reads, against careless and hostile files (the threat model in
    docs/audit.md). The settings file itself is read under the built-in defaults."""

    max_file_bytes: int = Field(
        _DEFAULT_LIMITS.max_file_bytes, ge=1024, le=1 << 30,
        description="Largest settings, runbook or rule file read; larger ones are refused.",
    )  # fmt: skip
    max_yaml_depth: int = Field(
        _DEFAULT_LIMITS.max_depth, ge=8, le=500,
        description="Deepest nesting of mappings and lists in a YAML file.",
    )  # fmt: skip
    max_yaml_nodes: int = Field(
        _DEFAULT_LIMITS.max_nodes, ge=1000, le=10_000_000,
        description="Most YAML nodes in one file, aliases expanded (stops alias bombs).",
    )  # fmt: skip

    def yaml_limits(self) -> YamlLimits:
        return YamlLimits(self.max_file_bytes, self.max_yaml_depth, self.max_yaml_nodes)


class Settings(Section):
    """All settings; `oncall config show` prints every field with where its value came from."""

    context: ContextSettings = Field(default_factory=ContextSettings)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    alertmanager: AlertmanagerSettings = Field(default_factory=AlertmanagerSettings)
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    gpu: GpuSettings = Field(default_factory=GpuSettings)
    alerts: AlertsSettings = Field(default_factory=AlertsSettings)
    runbooks: RunbooksSettings = Field(default_factory=RunbooksSettings)
    degradation: DegradationSettings = Field(default_factory=DegradationSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    guards: GuardsSettings = Field(default_factory=GuardsSettings)
    incidents: IncidentsSettings = Field(default_factory=IncidentsSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    read_only: bool = Field(False, description="Refuse every remediation; reading only.")
    keys: dict[str, str] = Field(
        default_factory=dict,
        description="Keymap: binding id (listed by `?`) → key(s), e.g. {app.command: ctrl+k}.",
    )
    contexts: dict[str, ContextEntry] = Field(
        default_factory=dict,
        description="Named clusters (regions, staging, production), each with its own "
        "backends; a section a context sets is merged over the top-level one of that name.",
    )

    @field_validator("contexts")
    @classmethod
    def _context_names(cls, contexts: dict[str, Any]) -> dict[str, Any]:
        # A name is part of an alert's key on the board (`eu/LLMHighP99Latency`) and of the
        # typed confirmation in production: plain words only.
        bad = [name for name in contexts if not _CONTEXT_NAME.fullmatch(name)]
        if bad:
            raise ValueError(
                f"context names are letters, digits, '.', '_' and '-': not {', '.join(bad)}"
            )
        return contexts

    def for_context(self, name: str) -> Settings:
        """These settings with context `name`'s sections in place of the top-level ones, and
        `context.name` set to it: what every command and client of that context reads."""
        entry = self.contexts[name]
        update: dict[str, Any] = {section: getattr(entry, section) for section in per_context()}
        update["context"] = ContextSettings(name=name, production=entry.production)
        return self.model_copy(update=update)

    @property
    def selected_context(self) -> str | None:
        """The context these settings are for (`for_context`); None: all of them, or none."""
        return self.context.name if self.context.name in self.contexts else None

    def context_names(self) -> list[str]:
        """The contexts, in the file's order; without `contexts:`, the one `context.name`."""
        return list(self.contexts) or [self.context.name]


#: The sections a context may set: the backends of one cluster. Named here rather than marked
#: on the section models, so that a section added later (alertmanager) is per context as soon
#: as `Settings` has it: the ones `Settings` lacks are skipped.
PER_CONTEXT_SECTIONS = (
    "prometheus",
    "alertmanager",
    "kubernetes",
    "redis",
    "vllm",
    "gpu",
    "degradation",
)


def per_context() -> tuple[str, ...]:
    """The per-context sections this version of `Settings` has, in their declared order."""
    return tuple(name for name in PER_CONTEXT_SECTIONS if name in Settings.model_fields)


def _context_entry() -> type[Section]:
    """The model of one entry of `contexts:`: every per-context section, typed as the
    top-level one, and `production`. The loader fills in what the entry leaves out from the
    top level before validating, so every field here is the context's effective value."""
    fields: dict[str, Any] = {}
    for name in per_context():
        section = Settings.model_fields[name].annotation
        assert isinstance(section, type)  # a section model, by declaration
        fields[name] = (section, Field(default_factory=section))
    fields["production"] = (
        bool,
        Field(False, description="A production cluster: a banner, and its name is typed."),
    )
    model: type[Section] = create_model(
        "ContextEntry", __base__=Section, __doc__="One named context of `contexts:`.", **fields
    )
    return model


if TYPE_CHECKING:

    class ContextEntry(Section):
        """What mypy knows of the model `_context_entry` makes."""

        production: bool

        def __getattr__(self, name: str) -> Any: ...

else:
    ContextEntry = _context_entry()
Settings.model_rebuild()
