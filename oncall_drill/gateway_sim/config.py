"""Settings of the simulated gateway: fixed at start (`GatewaySettings`) and drill-tunable
at runtime (`DrillConfig`, changed through `POST /drill/config`).

`DrillConfig.updated(payload)` validates a JSON object against the known fields and reports
every problem at once, so a scenario author sees all mistakes in one answer.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

#: The Redis key holding the degradation level (docs/drill.md), read on every request.
DEGRADATION_KEY = "ai-gateway:degradation-level"
#: Prefix of the response-cache keys; the rest is the SHA-256 of the prompt.
CACHE_PREFIX = "ai-gateway:cache:"
#: Prefix of the per-session conversation history lists (multi-step requests).
SESSION_PREFIX = "ai-gateway:session:"
MAX_LEVEL = 3
DISTRIBUTIONS = ("lognormal", "constant")


@dataclass(frozen=True)
class GatewaySettings:
    """What the command line fixes for the life of the process."""

    redis_url: str
    vllm_urls: tuple[str, ...]
    model: str
    host: str = "127.0.0.1"
    port: int = 8080
    #: Prompts longer than this many characters are rejected as `too_long`.
    max_prompt_chars: int = 4000
    #: Seed of the random draws (vector latency, extra rejections, forced unavailability).
    seed: int | None = None
    #: Timeout of one Redis command; a slow Redis must not hang the gateway.
    redis_timeout_seconds: float = 0.5


@dataclass(frozen=True)
class DrillConfig:
    """Knobs a scenario turns at runtime; the defaults give a healthy service."""

    #: Vector-search latency: lognormal with this median and 99.9th percentile (seconds), or
    #: "constant" at the median.
    vector_search_distribution: str = "lognormal"
    vector_search_p50_seconds: float = 0.03
    vector_search_p999_seconds: float = 0.12
    #: Fraction of otherwise valid prompts rejected anyway (reason `policy`): a stricter filter.
    extra_rejection_rate: float = 0.0
    #: Time to live of response-cache entries.
    cache_ttl_seconds: int = 300
    #: Extra lookups of never-existing cache keys per request: cache penetration (a crawler
    #: asking for what nobody cached, the failure mode the seeds name), each one a Redis miss.
    cache_penetration_lookups: int = 0
    #: Fraction of requests answered 503 without calling anything (an overloaded backend).
    unavailable_fraction: float = 0.0
    #: Time limit of one upstream LLM call; beyond it the client gets a 503.
    llm_timeout_seconds: float = 5.0
    #: `max_tokens` sent to vLLM.
    llm_max_tokens: int = 64
    #: Send vLLM's `ignore_eos` so every answer is `llm_max_tokens` long (long generations:
    #: the traffic that fills a KV cache).
    llm_ignore_eos: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The JSON object `GET /drill/config` returns."""
        return {f.name: getattr(self, f.name) for f in _public_fields()}

    def updated(self, payload: Any) -> DrillConfig:
        """A copy with payload's fields applied; `ConfigError` lists every problem."""
        if not isinstance(payload, dict):
            raise ConfigError(["expected a JSON object of configuration fields"])
        known = {f.name: f for f in _public_fields()}
        problems: list[str] = []
        changes: dict[str, Any] = {}
        for key, value in payload.items():
            spec = known.get(key)
            if spec is None:
                problems.append(f"{key}: unknown field (known: {', '.join(sorted(known))})")
                continue
            problem = _check(key, value, spec.type)
            if problem:
                problems.append(f"{key}: {problem}")
            else:
                changes[key] = float(value) if spec.type == "float" else value
        candidate = dataclasses.replace(self, **changes)
        problems.extend(candidate.problems())
        if problems:
            raise ConfigError(problems)
        return candidate

    def problems(self) -> list[str]:
        """Cross-field problems of a candidate configuration."""
        out: list[str] = []
        if self.vector_search_distribution not in DISTRIBUTIONS:
            out.append(f"vector_search_distribution: one of {', '.join(DISTRIBUTIONS)}")
        if self.vector_search_p50_seconds <= 0:
            out.append("vector_search_p50_seconds: must be > 0")
        if self.vector_search_p999_seconds < self.vector_search_p50_seconds:
            out.append("vector_search_p999_seconds: must be >= vector_search_p50_seconds")
        if self.vector_search_p999_seconds > 60:
            out.append("vector_search_p999_seconds: at most 60")
        for name in ("extra_rejection_rate", "unavailable_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                out.append(f"{name}: must be within 0..1")
        if self.cache_ttl_seconds < 1:
            out.append("cache_ttl_seconds: must be >= 1")
        if not 0 <= self.cache_penetration_lookups <= 20:
            out.append("cache_penetration_lookups: must be within [0, 20]")
        if not 0 < self.llm_timeout_seconds <= 120:
            out.append("llm_timeout_seconds: must be within (0, 120]")
        if not 1 <= self.llm_max_tokens <= 4096:
            out.append("llm_max_tokens: must be within 1..4096")
        return out


class ConfigError(ValueError):
    """A rejected configuration change; `problems` lists every reason."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _public_fields() -> list[dataclasses.Field[Any]]:
    return list(dataclasses.fields(DrillConfig))


def _check(key: str, value: Any, type_name: Any) -> str | None:
    """Why value does not fit the field's declared type (annotations are strings here)."""
    if type_name == "str":
        return None if isinstance(value, str) else "expected a string"
    if type_name == "bool":
        return None if isinstance(value, bool) else "expected true or false"
    if type_name == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else "expected an integer"
    if type_name == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "expected a number"
        return None if math.isfinite(value) else "expected a finite number"
    return f"unsupported field type {type_name!r} for {key}"
