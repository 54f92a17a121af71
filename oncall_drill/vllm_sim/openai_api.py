"""OpenAI-compatible request validation and response bodies, shaped like vLLM 0.33's.

Pure functions, no I/O: `parse_generation` turns a `/v1/completions` or
`/v1/chat/completions` body into a `GenerationRequest` (or raises `ApiError` with vLLM's
error body), and the `*_body` / `*_chunk` functions build the JSON the server sends.

Token counts come from a crude deterministic tokenizer (words and punctuation marks), with a
few tokens of chat-template overhead per message; output length is `max_tokens` when
`ignore_eos` is set (a vLLM extension), else a length derived from the prompt's hash.
"""

from __future__ import annotations

import re
import uuid
import zlib
from dataclasses import dataclass
from typing import Any, Literal

from oncall_drill.vllm_sim.config import SimConfig

Kind = Literal["chat", "completion"]

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
#: Chat-template tokens around each message and before the assistant's answer.
_PER_MESSAGE_TOKENS = 4
_ASSISTANT_HEADER_TOKENS = 3
#: Completions default to 16 tokens, as in OpenAI's API and vLLM's CompletionRequest.
_COMPLETION_DEFAULT_MAX_TOKENS = 16
_NATURAL_MIN, _NATURAL_SPREAD = 8, 120

#: The body vLLM sends for requests that fail because the engine died (backends.md §1.2).
ENGINE_DEAD_MESSAGE = "The server had an error while processing your request."


class ApiError(Exception):
    """A request vLLM would refuse; `body()` is the JSON error vLLM returns."""

    def __init__(
        self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self) -> dict[str, Any]:
        """`{"error": {"message", "type", "param", "code"}}`."""
        return error_body(self.message, self.err_type, self.status, self.param)


def error_body(message: str, err_type: str, code: int, param: str | None = None) -> dict[str, Any]:
    """vLLM 0.33's ErrorResponse JSON."""
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def engine_dead_body() -> dict[str, Any]:
    """What in-flight and new requests get once the engine is dead."""
    return error_body(ENGINE_DEAD_MESSAGE, "InternalServerError", 500)


@dataclass(frozen=True)
class GenerationRequest:
    """A validated generation request, ready for the engine."""

    kind: Kind
    model: str
    prompt_tokens: int
    max_tokens: int
    target_tokens: int
    stream: bool
    include_usage: bool
    prefix_key: int


def count_tokens(text: str) -> int:
    """Deterministic stand-in for a tokenizer: words and punctuation marks."""
    return len(_TOKEN_RE.findall(text))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return " ".join(str(p) for p in parts)
    if content is None:
        return ""
    raise ApiError(400, "message content must be a string or a list of content parts")


def _prompt_of(kind: Kind, body: dict[str, Any]) -> tuple[str, int]:
    """The prompt text (for hashing) and its token count."""
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "Field required: messages (a non-empty list)", param="messages")
        texts: list[str] = []
        tokens = _ASSISTANT_HEADER_TOKENS
        for message in messages:
            if not isinstance(message, dict) or "role" not in message:
                raise ApiError(400, "each message needs a role", param="messages")
            text = _content_text(message.get("content"))
            texts.append(f"{message['role']}: {text}")
            tokens += count_tokens(text) + _PER_MESSAGE_TOKENS
        return "\n".join(texts), tokens
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise ApiError(400, "Prompt cannot be empty", param="prompt")
        return prompt, count_tokens(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return " ".join(map(str, prompt)), len(prompt)
    raise ApiError(
        400, "prompt must be a string, or a list of token ids (batches unsupported)", "prompt"
    )


def _int_field(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ApiError(400, f"{name} must be an integer", param=name)
        return value
    return None


def parse_generation(kind: Kind, body: Any, config: SimConfig) -> GenerationRequest:
    """Validate a generation request body as vLLM does; raises `ApiError`."""
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    names = config.served_model_names or (config.model,)
    model = body.get("model") or config.served_model_name
    if model not in names:
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
    n = _int_field(body, "n")
    if n is not None and n != 1:
        raise ApiError(400, "the simulator supports only n=1", param="n")
    text, prompt_tokens = _prompt_of(kind, body)
    requested = _int_field(body, "max_completion_tokens", "max_tokens")
    if requested is not None and requested < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {requested}.", param="max_tokens")
    if requested is None:
        default = config.max_model_len - prompt_tokens
        requested = _COMPLETION_DEFAULT_MAX_TOKENS if kind == "completion" else default
    if prompt_tokens + requested > config.max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {config.max_model_len} tokens. However, "
            f"you requested {prompt_tokens + requested} tokens ({prompt_tokens} in the "
            f"messages, {requested} in the completion). Please reduce the length of the "
            f"messages or completion.",
        )
    prefix_key = zlib.crc32(text.encode())
    natural = _NATURAL_MIN + prefix_key % _NATURAL_SPREAD
    target = requested if body.get("ignore_eos") is True else min(requested, natural)
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return GenerationRequest(
        kind=kind,
        model=model,
        prompt_tokens=prompt_tokens,
        max_tokens=requested,
        target_tokens=target,
        stream=body.get("stream") is True,
        include_usage=include_usage,
        prefix_key=prefix_key,
    )


def new_request_id(kind: Kind) -> str:
    """`chatcmpl-<hex>` or `cmpl-<hex>`, as vLLM names responses."""
    return f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The `usage` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def _envelope(
    req: GenerationRequest, request_id: str, created: int, chat_object: str, choices: list[Any]
) -> dict[str, Any]:
    """The head every completion object and chunk starts with, in vLLM's key order.

    Completions (not chat) always say `text_completion`, streamed or not.
    """
    return {
        "id": request_id,
        "object": chat_object if req.kind == "chat" else "text_completion",
        "created": created,
        "model": req.model,
        "choices": choices,
    }


def response_body(
    req: GenerationRequest,
    request_id: str,
    created: int,
    *,
    text: str,
    finish_reason: str,
    completion_tokens: int,
) -> dict[str, Any]:
    """The non-streaming `chat.completion` / `text_completion` object."""
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish_reason}
    if req.kind == "chat":
        choice["message"] = {
            "role": "assistant",
            "content": text,
            "refusal": None,
            "reasoning_content": None,
            "tool_calls": [],
        }
    else:
        choice["text"] = text
        choice["prompt_logprobs"] = None
    choice["stop_reason"] = None
    return {
        **_envelope(req, request_id, created, "chat.completion", [choice]),
        "usage": usage(req.prompt_tokens, completion_tokens),
        "system_fingerprint": None,
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }


def stream_chunk(
    req: GenerationRequest,
    request_id: str,
    created: int,
    text: str | None,
    finish_reason: str | None = None,
    *,
    role: bool = False,
) -> dict[str, Any]:
    """One SSE chunk; for chat, `role=True` makes the opening chunk with the assistant role."""
    choice: dict[str, Any] = {"index": 0, "logprobs": None}
    if req.kind == "chat":
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
        if text is not None and not role:
            delta["content"] = text
        choice["delta"] = delta
    else:
        choice["text"] = text or ""
    choice["finish_reason"] = finish_reason
    choice["stop_reason"] = None
    return _envelope(req, request_id, created, "chat.completion.chunk", [choice])


def usage_chunk(
    req: GenerationRequest, request_id: str, created: int, completion_tokens: int
) -> dict[str, Any]:
    """The final chunk of `stream_options.include_usage`: no choices, only usage."""
    return {
        **_envelope(req, request_id, created, "chat.completion.chunk", []),
        "usage": usage(req.prompt_tokens, completion_tokens),
    }


def models_body(config: SimConfig, created: int) -> dict[str, Any]:
    """`GET /v1/models`: one ModelCard per served name."""
    names = config.served_model_names or (config.model,)
    data = [
        {
            "id": name,
            "object": "model",
            "created": created,
            "owned_by": "vllm",
            "root": config.model,
            "parent": None,
            "max_model_len": config.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{uuid.uuid4().hex}",
                    "object": "model_permission",
                    "created": created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        for name in names
    ]
    return {"object": "list", "data": data}
