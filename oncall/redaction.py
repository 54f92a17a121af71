"""One redaction for every text that leaves the process: terminal, JSON output, logs.

Three kinds of secret are masked, by pattern so that text we never parsed is covered too:

- URL userinfo (`https://user:pw@host`), found by a tolerant regex rather than `urlsplit`,
  which refuses URLs with a bad port or a bad IPv6 literal yet they still reach error texts;
- credentials a backend echoes in an error body: `Authorization: Bearer …`, `Basic <base64>`,
  `token=…`, `"api_key": "…"`;
- the secrets of the effective settings (passwords, tokens, URL passwords), registered by the
  settings loader with `register_secret`, masked wherever they appear verbatim.

`RedactingStream` wraps stdout/stderr for the headless commands, so what `print`, `json.dump`
and logging write is redacted whole lines at a time. This module imports nothing of oncall:
it is the lowest layer, usable by errors, backends and the CLI alike.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import threading
from typing import TextIO

MASK = "********"
#: Shorter registered secrets are not masked by value: "a" or "1234" would mask half a text.
MIN_SECRET_CHARS = 4

# scheme://USERINFO@ — USERINFO runs to the last "@" before the path (as urlsplit reads it).
_URL_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^\s/?#@\"'<>]*(?:@[^\s/?#@\"'<>]*)*)@"
)
_SCHEMES = r"(?P<scheme>bearer|basic|token|digest|negotiate)"
_AUTH_HEADER = re.compile(
    r"(?i)(?P<head>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:" + _SCHEMES + r"\s+)?"
    r"(?P<value>[^\s\\\"',;]+)"
)
# A bare "Bearer X" / "Basic X" (see `_scheme_value`: English such as "Basic authentication
# failed" stays readable).
_AUTH_SCHEME = re.compile(
    r"(?i)(?P<head>\b(?P<kind>bearer|basic)\s+)(?P<value>[A-Za-z0-9._~+/\-]{6,}=*)"
)
_KEYS = (
    r"access_token|refresh_token|id_token|token|api[_-]?key|apikey|password|passwd|pwd|"
    r"secret|client_secret|x-api-key|x-auth-token"
)
_KEY_VALUE = re.compile(
    r"(?i)(?P<head>(?<![A-Za-z0-9_])(?:" + _KEYS + r")=)(?P<value>[^\s\\&\"',;]+)"
)
# `"api_key": "…"`, also as it reads inside a JSON string (`\"api_key\": \"…\"`).
_QUOTED_KEY_VALUE = re.compile(
    r"(?i)(?P<head>\\?[\"'](?:" + _KEYS + r")\\?[\"']\s*:\s*\\?[\"'])(?P<value>[^\\\"']+)"
)
_HEADER_KEY = re.compile(
    r"(?im)(?P<head>^\s*(?:x-api-key|x-auth-token|api-key)\s*:\s*)(?P<value>\S+)"
)

_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Mask this value wherever it appears from now on (a configured password or token)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _secrets.add(value)


def register_url(url: str) -> None:
    """Register the password (or a lone user, which may be a token) of a configured URL,
    read tolerantly: between "://" and the last "@" before the host."""
    _, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return
    info = rest.rsplit("@", 1)[0]
    user, colon, password = info.partition(":")
    if colon or not _names_user(url):
        register_secret(password if colon else user)


def forget_secrets() -> None:
    """Drop every registered secret (tests, and a process that loads other settings)."""
    with _lock:
        _secrets.clear()


#: Schemes whose lone userinfo (`redis://oncall-operator@host`) is a user name, not a token:
#: redis-py reads it as the ACL user (the password form is `redis://:pw@`). Masking it hid
#: every text that names that user, Lease holders included (docs/audit.md).
_USER_SCHEMES = ("redis://", "rediss://", "unix://")


def _names_user(url: str) -> bool:
    return url[:9].casefold().startswith(_USER_SCHEMES)


def _url_info(match: re.Match[str]) -> str:
    user, colon, _password = match["info"].partition(":")
    # With a password the user stays readable (it helps debugging); a lone user may be a token,
    # except where the scheme says it is a user name.
    if colon or _names_user(match["scheme"]):
        return f"{match['scheme']}{user}{':' + MASK if colon else ''}@"
    return f"{match['scheme']}{MASK}@"


def _url_whole_info(match: re.Match[str]) -> str:
    return f"{match['scheme']}{MASK}@"


def _auth(match: re.Match[str]) -> str:
    scheme = match.groupdict().get("scheme")
    return f"{match['head']}{scheme + ' ' if scheme else ''}{MASK}"


def _value(match: re.Match[str]) -> str:
    return f"{match['head']}{MASK}"


def _scheme_value(match: re.Match[str]) -> str:
    """Mask a token that looks like one: a digit or a symbol in it, 20 characters or more,
    or (Basic) base64 of "user:password"."""
    value = match["value"]
    looks_like = len(value) >= 20 or re.search(r"[0-9._~+/\-=]", value) is not None
    if not looks_like and match["kind"].lower() == "basic":
        try:
            looks_like = b":" in base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        except (binascii.Error, ValueError):
            looks_like = False
    return f"{match['head']}{MASK}" if looks_like else match[0]


#: C0 controls but tab and newline, DEL and C1 controls: each shown as "?". A backend's text
#: (a rule's name or annotation, a warning, an error body) with an escape sequence in it
#: would otherwise reach the operator's terminal as a command to it: clear or repaint the
#: screen (hiding the production banner), set the title, write the clipboard (OSC 52).
_CONTROLS = {c: "?" for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}


def terminal_safe(text: str) -> str:
    """`text` with the control characters a terminal would act on replaced by "?"."""
    return text.translate(_CONTROLS)


#: What `json.dumps(..., ensure_ascii=False)` leaves raw that a terminal may act on: DEL and
#: the C1 controls (it escapes C0 itself). As `\u00XX` escapes, the JSON means the same.
_JSON_CONTROLS = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def json_terminal_safe(text: str) -> str:
    """JSON text (from `json.dumps`) with DEL and the C1 controls escaped: the same JSON,
    safe on a terminal. Only inside strings can they be, where an escape means the same."""
    return text.translate(_JSON_CONTROLS)


def redact(text: str, *, keep_url_user: bool = True) -> str:
    """text with every secret masked (see the module's docstring). `keep_url_user=False`
    masks a URL's whole userinfo (for text a process printed: its user may be a secret too)."""
    if not text:
        return text
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)  # longest first: no partial leftovers
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _URL_USERINFO.sub(_url_info if keep_url_user else _url_whole_info, text)
    text = _AUTH_HEADER.sub(_auth, text)
    text = _AUTH_SCHEME.sub(_scheme_value, text)
    text = _KEY_VALUE.sub(_value, text)
    text = _QUOTED_KEY_VALUE.sub(_value, text)
    return _HEADER_KEY.sub(_value, text)


# What a process prints in its log, beyond `redact`'s patterns (moved here from the kube.logs
# probe). A name that says secret: the word ends the name or a separator follows
# ("hf_token", "api-key", "token_file"), so "max_num_batched_tokens=8192" is kept.
_SECRET_NAME = (
    r"[\w.-]*(?:token|secret|passw(?:or)?d|api[_-]?key|access[_-]?key|credential)"  # noqa: S105
    r"(?:[_.-][\w.-]*)?"
)
_LOG_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization: Bearer xyz / proxy-authorization=Basic xyz (the whole value)
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)[^\"'\r\n]+"),
        rf"\1{MASK}",
    ),
    (re.compile(r"(?i)\b(bearer|basic)(\s+)(?!\*)[A-Za-z0-9._~+/=-]+"), rf"\1\2{MASK}"),
    # --api-key VALUE, --hf-token=VALUE
    (re.compile(rf"(?i)(--{_SECRET_NAME})(=|\s+)(?!-)\S+"), rf"\1\2{MASK}"),
    # api_key=VALUE, "token": "VALUE", password: VALUE
    (
        re.compile(rf"(?i)([\"']?{_SECRET_NAME}[\"']?\s*[:=]\s*)([\"']?)[^\s\"',;}}]+"),
        rf"\1\2{MASK}",
    ),
    # Token shapes: Hugging Face, GitHub, Slack, OpenAI-style keys, JWTs.
    (re.compile(r"\b(?:hf|ghp|gho|ghs|github_pat|xox[bpas])_[A-Za-z0-9_]{16,}"), MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"), MASK),
)


def redact_log(line: str) -> str:
    """A line a process printed (a container's log), redacted more eagerly than `redact`:
    whole URL userinfo, whole Authorization values, `--secret-flag VALUE`, `password: VALUE`
    and well-known token shapes. Not for oncall's own messages, where "redis.password: …"
    names a key rather than showing its value."""
    line = redact(line, keep_url_user=False)
    for pattern, replacement in _LOG_PATTERNS:
        line = pattern.sub(replacement, line)
    return line


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what it writes, a whole line at a time, and disarms the
    control characters in it (`terminal_safe`: a rule name or an error body a backend sent
    is printed as text, never as a command to the terminal).

    `json.dump` and `print` write in pieces; buffering to the end of a line means a secret
    split across two writes is still seen whole. `flush` writes out a partial line. A
    command's own escape sequence (`oncall alerts --watch` clearing the screen) is written
    to `inner`.
    """

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self.inner = inner
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            complete, _, self._pending = self._pending.rpartition("\n")
            self.inner.write(terminal_safe(redact(complete)) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.inner.write(terminal_safe(redact(self._pending)))
            self._pending = ""
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")
