"""ACP agents' failures in the shared taxonomy: pure functions over what an agent reported.

ACP has no error vocabulary for a failed model request, and the agents use four shapes
(reference/acp-agents.md, "Fault behaviour, side by side"):

* a JSON-RPC error on ``session/prompt``: Gemini CLI uses the HTTP status as the code and the
  provider's error body as the message; Qwen Code, the Claude adapter and OpenCode use -32603
  with the detail in ``message`` or ``data``;
* stop reason ``refusal`` with the error in ``_meta`` (CodeBuddy: ``codebuddy.ai/errorMessage``);
* stop reason ``end_turn`` with the error only as a text chunk (Copilot "Error: … Last error:
  500 …"; the Codex adapter after ``threadStatus: systemError``);
* silent retries (every agent but CodeBuddy): only the gateway's turn deadline ends those.

Every path ends in ``classify``: the HTTP status when one can be found in the text, else the
wording.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from app.events import RETRYABLE_KINDS, FailureKind, TurnError
from app.providers.faults import kind_for_status, kind_for_text

AUTH_REQUIRED = -32000
"""ACP's "authentication required" error code."""
_JSONRPC_RESERVED = range(-32768, -31999)

_STATUS_PATTERNS = (
    re.compile(r"Last error: (\d{3})\b"),  # Copilot
    re.compile(r"last status: (\d{3})\b"),  # Codex
    re.compile(r"API Error: (\d{3})\b"),  # Claude adapter
    re.compile(r"\(HTTP (\d{3})\)"),  # Copilot
    re.compile(r"unexpected status (\d{3})\b", re.IGNORECASE),
    re.compile(r"\"(?:statusCode|status_code|code)\"\s*:\s*(\d{3})\b"),  # JSON bodies
    re.compile(r"^\s*(\d{3})\s+\S"),  # Qwen: "500 stub: internal server error"
)
_SERVER_TEXT = re.compile(r"high demand|temporary errors?", re.IGNORECASE)
"""The Codex adapter's words for its model's 5xx ("We're currently experiencing high demand")."""
_AUTH_TEXT = re.compile(
    r"unauthori[sz]ed|authenticat|invalid (?:x-)?api.?key|api key not valid|forbidden|"
    r"permission denied|not logged in|log ?in required|\b40[13]\b",
    re.IGNORECASE,
)

COPILOT_RETRY = re.compile(r"^Info: .*\bRetrying\b", re.DOTALL)
"""Copilot's notice before it retries a failed model request (a text chunk)."""
COPILOT_ERROR = re.compile(
    r"^Error: .*(?:model|request|retried|provider|authenticat|HTTP \d{3})",
    re.IGNORECASE | re.DOTALL,
)
"""Copilot's final failure, as the turn's only text ("Error: Failed to get response …",
"Error: Authentication failed with provider at … (HTTP 401)")."""
NOTICE = re.compile(r"^Info: ")
"""Copilot's other notices ("Info: Operation cancelled by user")."""
API_ERROR = re.compile(r"^API Error: \d{3}\b")
"""The Claude adapter's copy, as a text chunk, of the error its prompt then fails with."""


def status_in(text: str) -> int | None:
    """The HTTP status an error text names, if it names one."""
    for pattern in _STATUS_PATTERNS:
        match = pattern.search(text)
        if match:
            status = int(match.group(1))
            if 400 <= status <= 599:
                return status
    return None


def classify(provider: str, text: str, *, status: int | None = None) -> TurnError:
    """The failure an error text describes; ``status`` when the caller knows it already."""
    if status is None:
        status = status_in(text)
    kind: FailureKind | None = kind_for_status(status) if status is not None else None
    if kind is None and _SERVER_TEXT.search(text):
        kind = "server_error"
    if kind is None:
        kind = "auth" if _AUTH_TEXT.search(text) else kind_for_text(text)
    if kind == "unknown":
        kind = "agent_error"
    return TurnError(
        kind=kind,
        message=text.strip() or "the agent reported an error",
        retryable=kind in RETRYABLE_KINDS,
        provider=provider,
    )


def _google_message(message: str) -> str:
    """Gemini CLI's message is the provider's raw error body: its ``error.message``."""
    try:
        body = json.loads(message)
    except ValueError:
        return message
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return message


def from_rpc_error(provider: str, code: int, message: str, data: Any) -> TurnError:
    """A JSON-RPC error answer to ``session/prompt``."""
    if code == AUTH_REQUIRED:
        return TurnError(
            kind="auth",
            message=f"the agent needs authentication: {message}",
            provider=provider,
        )
    details = ""
    if isinstance(data, Mapping):
        details = " ".join(
            str(v) for k, v in data.items() if isinstance(v, str) and k not in ("service",)
        )
    elif isinstance(data, str):
        details = data
    if 400 <= code <= 599:  # Gemini CLI: the HTTP status is the code
        return classify(provider, _google_message(message), status=code)
    text = f"{message} ({details})" if details else message
    if code in _JSONRPC_RESERVED and code != -32603:
        # Method not found, invalid params, …: the agent refused what the gateway sent.
        return TurnError(kind="agent_error", message=text, provider=provider)
    return classify(provider, text, status=status_in(message) or status_in(details))


def from_refusal(provider: str, meta: Mapping[str, Any] | None) -> TurnError | None:
    """A ``refusal`` stop that is a failed model request (CodeBuddy), or None for a model
    that refused on its own."""
    if not meta:
        return None
    detail = meta.get("codebuddy.ai/errorMessage")
    if not isinstance(detail, str):
        return None
    status: int | None = None
    text = detail
    try:
        body = json.loads(detail)
    except ValueError:
        body = None
    if isinstance(body, dict):
        data = body.get("data")
        inner: dict[str, Any] = data if isinstance(data, dict) else {}
        code = inner.get("statusCode")
        status = code if isinstance(code, int) else None
        text = str(inner.get("message") or body.get("message") or detail)
    return classify(provider, text, status=status)
