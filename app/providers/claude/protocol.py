"""Encoders for what the gateway writes to Claude Code's stdin (stream-json input).

Each function returns one compact JSON object as ``bytes`` without the trailing newline; the
writer adds ``b"\\n"``. ``json.dumps`` escapes control characters, so the result is always a
single line. ASCII escaping (the ``json`` default, as in the Python SDK) keeps a prompt with
lone surrogates encodable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import assert_never

from pydantic import JsonValue

from app.providers.base import ApprovalAnswer

__all__ = [
    "DEFAULT_DENY_MESSAGE",
    "error_response",
    "initialize_request",
    "interrupt_request",
    "permission_response",
    "session_permission_updates",
    "user_message",
]

DEFAULT_DENY_MESSAGE = "Denied by the user through Agent Gateway."

# Of the CLI's `permission_suggestions`, only rule additions are honoured for "allow for
# session". `setMode` would switch the whole session's permission mode (the approval mode is
# the gateway's to choose), and `addDirectories` would widen file access beyond the workspace
# the gateway confined the session to.
_SESSION_SUGGESTION_TYPES = frozenset({"addRules", "replaceRules"})


def _encode(message: dict[str, JsonValue]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode("ascii")


def user_message(prompt: str) -> bytes:
    """Encode one user turn."""
    return _encode(
        {
            "type": "user",
            "message": {"role": "user", "content": prompt},
            "parent_tool_use_id": None,
            # Ignored by the CLI; the Python SDK sends "" too.
            "session_id": "",
        }
    )


def initialize_request(request_id: str) -> bytes:
    """Encode the ``initialize`` control request that must precede the first user turn."""
    return _encode(
        {
            "type": "control_request",
            "request_id": request_id,
            "request": {"subtype": "initialize", "hooks": None},
        }
    )


def interrupt_request(request_id: str) -> bytes:
    """Encode the ``interrupt`` control request that stops the running turn."""
    return _encode(
        {"type": "control_request", "request_id": request_id, "request": {"subtype": "interrupt"}}
    )


def session_permission_updates(suggestions: Sequence[JsonValue]) -> list[JsonValue]:
    """Return the CLI's suggestions that "allow for session" may apply, scoped to the session.

    Every kept suggestion gets ``destination: "session"``: the CLI proposes e.g.
    ``localSettings``, which would write the rule into the workspace's
    ``.claude/settings.local.json`` and outlive the gateway session (and apply to other
    sessions on that workspace). A session rule lives in the CLI process only.
    """
    updates: list[JsonValue] = []
    for suggestion in suggestions:
        if not isinstance(suggestion, dict):
            continue
        if suggestion.get("type") not in _SESSION_SUGGESTION_TYPES:
            continue
        if suggestion.get("behavior", "allow") != "allow":
            continue
        updates.append({**suggestion, "destination": "session"})
    return updates


def permission_response(
    request_id: str,
    answer: ApprovalAnswer,
    original_input: dict[str, JsonValue],
    suggestions: Sequence[JsonValue] | None = None,
) -> bytes:
    """Encode the answer to a ``can_use_tool`` request.

    An allow always carries ``updatedInput`` (the original input unless the client edited it),
    as the CLI expects. ``allow_session`` also carries ``updatedPermissions`` built from the
    request's ``suggestions`` (see ``session_permission_updates``) when any apply.
    """
    result: dict[str, JsonValue]
    match answer.decision:
        case "allow" | "allow_session":
            updated_input = (
                answer.updated_input if answer.updated_input is not None else original_input
            )
            result = {"behavior": "allow", "updatedInput": updated_input}
            if answer.decision == "allow_session" and suggestions:
                updates = session_permission_updates(suggestions)
                if updates:
                    result["updatedPermissions"] = updates
        case "deny":
            result = {"behavior": "deny", "message": answer.message or DEFAULT_DENY_MESSAGE}
        case _:
            assert_never(answer.decision)
    return _encode(
        {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": result},
        }
    )


def error_response(request_id: str, message: str) -> bytes:
    """Encode an error answer to a CLI request the gateway does not serve.

    The CLI blocks on every request it sends until it is answered, so unsupported ones
    (``hook_callback``, ``mcp_message``, ``elicitation``…) get this instead of silence.
    """
    return _encode(
        {
            "type": "control_response",
            "response": {"subtype": "error", "request_id": request_id, "error": message},
        }
    )
