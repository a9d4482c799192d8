"""Codex server requests as gateway approvals, and the answers that go back.

Pure functions, but for ``auto_accepts`` resolving symlinks under the workspace.

Only command and file-change approvals reach a client (reference §2.3). Every other server
request gets a refusal here: the server waits for an answer to each of its requests, so a
request left unanswered would stall its turn until the idle watchdog fired.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, assert_never

from pydantic import JsonValue

from app.events import ApprovalDecision, ApprovalMode
from app.providers.base import ApprovalAnswer, ApprovalRequest
from app.providers.codex.protocol import ServerRequest

__all__ = [
    "APPROVAL_METHODS",
    "approval_request",
    "auto_accepts",
    "decision_result",
    "options_for",
    "refusal",
]

COMMAND_APPROVAL = "item/commandExecution/requestApproval"
FILE_CHANGE_APPROVAL = "item/fileChange/requestApproval"
APPROVAL_METHODS = frozenset({COMMAND_APPROVAL, FILE_CHANGE_APPROVAL})

_ALL_OPTIONS: tuple[ApprovalDecision, ...] = ("allow", "deny", "allow_session")
_OPTION_OF: dict[str, ApprovalDecision] = {
    "accept": "allow",
    "acceptForSession": "allow_session",
    "decline": "deny",
    "cancel": "deny",
}


def options_for(available: object) -> tuple[ApprovalDecision, ...]:
    """Map Codex's ``availableDecisions`` to the options a client may pick.

    Without the list every option applies. Deny is always offered: 0.169.0 listed only
    ``accept``, an execpolicy amendment and ``cancel`` for a command, yet answering
    ``decline`` declined the command and the turn went on (obs). Amendments (persistent
    exec / network policy rules) have no gateway option and are never chosen.
    """
    if not isinstance(available, list):
        return _ALL_OPTIONS
    offered = {_OPTION_OF[d] for d in available if isinstance(d, str) and d in _OPTION_OF}
    offered.add("deny")
    return tuple(option for option in _ALL_OPTIONS if option in offered)


def approval_request(
    request: ServerRequest, file_changes: Mapping[str, list[Any]]
) -> ApprovalRequest | None:
    """Return the approval a client must answer, or ``None`` if ``request`` is not one.

    A file-change request names only its item; the changes (path, kind, diff) come from that
    item's ``item/started``, passed in ``file_changes`` by item id.
    """
    params = request.params
    item_id = _str(params.get("itemId"))
    reason = _str(params.get("reason"))
    if request.method == COMMAND_APPROVAL:
        command = _str(params.get("command")) or ""
        tool_input: dict[str, JsonValue] = {"command": command}
        for key, name in (("cwd", "cwd"), ("commandActions", "actions"), ("reason", "reason")):
            if params.get(key) is not None:
                tool_input[name] = params[key]
        return ApprovalRequest(
            request_id=str(request.id),
            tool="command",
            input=tool_input,
            options=options_for(params.get("availableDecisions")),
            title=reason or (f"Run {command}" if command else None),
            tool_id=item_id,
        )
    if request.method == FILE_CHANGE_APPROVAL:
        changes = list(file_changes.get(item_id or "", []))
        tool_input = {"changes": changes}
        if reason is not None:
            tool_input["reason"] = reason
        if params.get("grantRoot") is not None:
            tool_input["grant_root"] = params["grantRoot"]
        paths = [
            c["path"] for c in changes if isinstance(c, dict) and isinstance(c.get("path"), str)
        ]
        return ApprovalRequest(
            request_id=str(request.id),
            tool="file_change",
            input=tool_input,
            options=options_for(params.get("availableDecisions")),
            title=reason or (f"Change {', '.join(paths)}" if paths else None),
            tool_id=item_id,
        )
    return None


def auto_accepts(mode: ApprovalMode, request: ApprovalRequest, workspace: Path) -> bool:
    """Whether the gateway accepts ``request`` itself, without asking a client.

    In ``auto_edits`` mode a file change is accepted when every path it writes (and every
    rename target) resolves, symlinks followed, inside the workspace, and it asks for no
    wider write access (``grant_root``). Everything else goes to the client.
    """
    if mode != "auto_edits" or request.tool != "file_change" or "grant_root" in request.input:
        return False
    changes = request.input.get("changes")
    if not isinstance(changes, list) or not changes:
        return False
    root = os.path.realpath(workspace)
    for change in changes:
        if not isinstance(change, dict):
            return False
        kind = change.get("kind")
        targets = [change.get("path")]
        if isinstance(kind, dict) and kind.get("move_path") is not None:
            targets.append(kind["move_path"])
        for target in targets:
            if not isinstance(target, str) or not target:
                return False
            resolved = os.path.realpath(os.path.join(root, target))
            if resolved != root and not resolved.startswith(root + os.sep):
                return False
    return True


def decision_result(
    answer: ApprovalAnswer, request: ApprovalRequest, available: object
) -> dict[str, JsonValue]:
    """Return the ``result`` answering an approval request with the client's decision.

    Codex runs exactly the command or patch it asked about, so an allow that edits the
    input cannot be honoured: it is sent as a decline rather than running something the
    client did not approve. ``allow_session`` falls back to ``accept`` when Codex does not
    offer ``acceptForSession``. Codex cannot pass a deny message on to the model.
    """
    match answer.decision:
        case "allow" | "allow_session":
            if answer.updated_input is not None and answer.updated_input != request.input:
                return {"decision": "decline"}
            session_ok = not isinstance(available, list) or "acceptForSession" in available
            if answer.decision == "allow_session" and session_ok:
                return {"decision": "acceptForSession"}
            return {"decision": "accept"}
        case "deny":
            return {"decision": "decline"}
        case _:
            assert_never(answer.decision)


def refusal(request: ServerRequest) -> dict[str, JsonValue] | None:
    """The answer that turns down a server request the gateway does not serve.

    ``None`` means "answer with a JSON-RPC error" (unknown methods, and requests whose only
    answers would be made up: user input, dynamic tools, auth and attestation).
    """
    match request.method:
        case "item/commandExecution/requestApproval" | "item/fileChange/requestApproval":
            return {"decision": "decline"}
        case "item/permissions/requestApproval":
            return {"permissions": {}, "scope": "turn"}  # grants nothing
        case "mcpServer/elicitation/request":
            return {"action": "decline"}
        case "applyPatchApproval" | "execCommandApproval":  # the v1 shapes
            return {"decision": "denied"}
        case _:
            return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
