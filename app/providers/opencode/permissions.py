"""OpenCode permissions: rulesets per approval mode, requests as approvals, answers as replies.

OpenCode 1.18.33 decides each tool call with ``Permission.evaluate``: the *last* rule whose
``permission`` and ``pattern`` match wins, over the agent's rules followed by the session's
(``merge(agent.permission, session.permission)``), so the ruleset sent with ``POST /session``
overrides the built-in agent's defaults — in which ``bash`` and ``edit`` are ``allow``. A tool
whose permission is denied for ``*`` is not offered to the model at all.

Permission names: ``bash`` (shell), ``edit`` (the edit, write and patch tools), ``webfetch``,
``question`` (asks the user: allowed in every mode, its questions reach the client as the
gateway's questions), and OpenCode's own guards ``external_directory`` (a path outside
the workspace) and ``doom_loop`` (the same call repeated), which ask by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias, assert_never

from pydantic import JsonValue

from app.events import ApprovalDecision, ApprovalMode
from app.providers.base import ApprovalAnswer, ApprovalRequest

__all__ = ["Reply", "approval_request", "permission_reply", "permission_ruleset"]

Action: TypeAlias = Literal["allow", "ask", "deny"]
Reply: TypeAlias = Literal["once", "always", "reject"]

# What `ask` mode puts in front of a human: anything that runs code, changes files or reaches
# the network. Reads, searches and todo lists run freely, as in Claude Code's default mode.
_GUARDED = ("bash", "edit", "webfetch")

# Switching into and out of plan mode asks the user through OpenCode's own UI, which the
# gateway does not relay; `opencode run` denies them for the same reason (1.18.33 run.ts).
_NEVER = ("plan_enter", "plan_exit")
# Asking the user runs nothing: its questions go to the client in every mode (they are never
# answered by a policy), so the permission itself is never asked about.
_ALWAYS = ("question",)


def permission_ruleset(mode: ApprovalMode) -> list[dict[str, JsonValue]]:
    """The ``permission`` ruleset for ``POST /session`` that enforces ``mode``.

    - ``ask``: shell, edits and web fetches ask.
    - ``auto_edits``: edits run, shell and web fetches ask.
    - ``allow_all``: everything runs, OpenCode's own guards included.
    - ``read_only``: shell, edits and web fetches are denied (and hidden from the model);
      OpenCode's own guards still ask.
    """
    actions: dict[str, Action]
    match mode:
        case "ask":
            actions = dict.fromkeys(_GUARDED, "ask")
        case "auto_edits":
            actions = {**dict.fromkeys(_GUARDED, "ask"), "edit": "allow"}
        case "allow_all":
            actions = {"*": "allow"}
        case "read_only":
            actions = dict.fromkeys(_GUARDED, "deny")
        case _:
            assert_never(mode)
    actions.update(dict.fromkeys(_NEVER, "deny"))
    actions.update(dict.fromkeys(_ALWAYS, "allow"))
    return [
        {"permission": permission, "pattern": "*", "action": action}
        for permission, action in actions.items()
    ]


def permission_reply(answer: ApprovalAnswer) -> dict[str, JsonValue]:
    """The body of ``POST /permission/{id}/reply`` for a client's answer.

    ``allow_session`` becomes ``always``: OpenCode then allows the request's ``always``
    patterns (e.g. ``touch *``) for the rest of the session. A deny's message reaches the
    model as the tool's error. OpenCode cannot run a tool with edited input, so
    ``updated_input`` is not sent.
    """
    reply = _REPLIES[answer.decision]
    body: dict[str, JsonValue] = {"reply": reply}
    if reply == "reject" and answer.message:
        body["message"] = answer.message
    return body


_REPLIES: dict[ApprovalDecision, Reply] = {
    "allow": "once",
    "allow_session": "always",
    "deny": "reject",
}


def approval_request(asked: Mapping[str, Any]) -> ApprovalRequest | None:
    """The approval a ``permission.asked`` event's properties stand for; ``None`` if malformed.

    The input is the request's ``metadata`` (``{"command"}`` for bash, ``{"filepath",
    "diff"}`` for edits) plus its ``patterns``; ``allow_session`` is offered only when
    OpenCode names ``always`` patterns to remember.
    """
    request_id = asked.get("id")
    permission = asked.get("permission")
    if not isinstance(request_id, str) or not request_id or not isinstance(permission, str):
        return None
    raw_patterns = asked.get("patterns")
    patterns = (
        [p for p in raw_patterns if isinstance(p, str)] if isinstance(raw_patterns, list) else []
    )
    metadata = asked.get("metadata")
    tool_input: dict[str, JsonValue] = dict(metadata) if isinstance(metadata, dict) else {}
    tool_input.setdefault("patterns", list(patterns))
    tool = asked.get("tool")
    call_id = tool.get("callID") if isinstance(tool, dict) else None
    always = asked.get("always")
    options: tuple[ApprovalDecision, ...] = ("allow", "deny")
    if isinstance(always, list) and always:
        options = ("allow", "deny", "allow_session")
    return ApprovalRequest(
        request_id=request_id,
        tool=permission,
        input=tool_input,
        options=options,
        title=f"{permission}: {', '.join(patterns)}" if patterns else permission,
        tool_id=call_id if isinstance(call_id, str) and call_id else None,
    )
