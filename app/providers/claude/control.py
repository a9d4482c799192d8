"""Claude Code's control messages on stdout → items (pure, no I/O).

A ``control_request`` is the CLI asking the gateway (``can_use_tool`` becomes an
``ApprovalAsked``, or a ``QuestionAsked`` for AskUserQuestion; any other subtype an
``UnsupportedControlRequest`` the provider refuses); a ``control_response`` is the CLI's reply
to a control request the gateway wrote to its stdin (see protocol.py), as a
``ControlReply``. Reference section 1.5.
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
    QuestionAsked,
    UnsupportedControlRequest,
)
from app.providers.claude.questions import ASK_TOOL, question_request
from app.providers.raw import as_dict, as_list, as_str

logger = logging.getLogger(__name__)

_ALL_OPTIONS: tuple[ApprovalDecision, ...] = ("allow", "deny", "allow_session")


def control_request(raw: dict[str, Any]) -> list[ClaudeItem]:
    """A ``control_request`` line: ``QuestionAsked`` for can_use_tool of AskUserQuestion,
    ``ApprovalAsked`` for any other tool, else ``UnsupportedControlRequest``.
    """
    request_id = as_str(raw.get("request_id"))
    if not request_id:
        logger.debug("claude: control_request without request_id")
        return []
    request = as_dict(raw.get("request"))
    subtype = as_str(request.get("subtype")) or ""
    if subtype != "can_use_tool":
        return [UnsupportedControlRequest(request_id=request_id, subtype=subtype)]
    tool = as_str(request.get("tool_name")) or ""
    tool_input = as_dict(request.get("input"))
    tool_id = as_str(request.get("tool_use_id"))
    if tool == ASK_TOOL:
        question = question_request(request_id, tool_input, tool_id)
        if question is not None:
            return [QuestionAsked(request=question, input=tool_input)]
    options = _ALL_OPTIONS
    if request.get("suppress_always_allow_rule") is True:
        options = ("allow", "deny")
    approval = ApprovalRequest(
        request_id=request_id,
        tool=tool,
        input=tool_input,
        options=options,
        # `title` is the full prompt sentence when present (reference §1.5).
        title=as_str(request.get("title")) or as_str(request.get("description")),
        tool_id=tool_id,
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
