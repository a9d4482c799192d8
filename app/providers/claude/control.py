"""Claude Code's control messages on stdout → items (pure, no I/O).

A ``control_request`` is the CLI asking the gateway (``can_use_tool`` becomes an
``ApprovalAsked``; any other subtype an ``UnsupportedControlRequest`` the provider refuses); a
``control_response`` is the CLI's reply to a control request the gateway wrote to its stdin
(see protocol.py), as a ``ControlReply``. Reference section 1.5.
"""

from __future__ import annotations

import logging
from typing import Any

from app.events import ApprovalDecision
from app.providers.base import ApprovalRequest
from app.providers.claude.items import (
    ApprovalAsked,
    ClaudeItem,
    ControlReply,
    UnsupportedControlRequest,
)
from app.providers.raw import as_dict, as_list, as_str

logger = logging.getLogger(__name__)

_ALL_OPTIONS: tuple[ApprovalDecision, ...] = ("allow", "deny", "allow_session")


def control_request(raw: dict[str, Any]) -> list[ClaudeItem]:
    """A ``control_request`` line: ``ApprovalAsked`` for can_use_tool, else
    ``UnsupportedControlRequest``.
    """
    request_id = as_str(raw.get("request_id"))
    if not request_id:
        logger.debug("claude: control_request without request_id")
        return []
    request = as_dict(raw.get("request"))
    subtype = as_str(request.get("subtype")) or ""
    if subtype != "can_use_tool":
        return [UnsupportedControlRequest(request_id=request_id, subtype=subtype)]
    options = _ALL_OPTIONS
    if request.get("suppress_always_allow_rule") is True:
        options = ("allow", "deny")
    approval = ApprovalRequest(
        request_id=request_id,
        tool=as_str(request.get("tool_name")) or "",
        input=as_dict(request.get("input")),
        options=options,
        # `title` is the full prompt sentence when present (reference §1.5).
        title=as_str(request.get("title")) or as_str(request.get("description")),
        tool_id=as_str(request.get("tool_use_id")),
    )
    return [
        ApprovalAsked(request=approval, suggestions=as_list(request.get("permission_suggestions")))
    ]


def control_response(raw: dict[str, Any]) -> list[ClaudeItem]:
    """A ``control_response`` line: the CLI's reply to a control request the gateway sent."""
    response = as_dict(raw.get("response"))
    request_id = as_str(response.get("request_id"))
    if not request_id:
        return []
    if response.get("subtype") == "success":
        return [
            ControlReply(request_id=request_id, ok=True, payload=as_dict(response.get("response")))
        ]
    error = as_str(response.get("error")) or "control request failed"
    return [ControlReply(request_id=request_id, ok=False, error=error)]
