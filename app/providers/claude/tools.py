"""How Claude Code tool calls look in the event model: their kind, and plans."""

from __future__ import annotations

from typing import Any

from app.events import PlanEntry, PlanStatus, PlanUpdated, ToolKind

PLAN_TOOL = "TodoWrite"
"""The tool whose input is the agent's whole plan: ``{todos: [{content, status, activeForm}]}``."""
_PLAN_STATUSES: frozenset[PlanStatus] = frozenset({"pending", "in_progress", "completed"})

_TOOL_KINDS: dict[str, ToolKind] = {
    "Bash": "command",
    "BashOutput": "command",
    "KillShell": "command",
    "Edit": "file_change",
    "MultiEdit": "file_change",
    "Write": "file_change",
    "NotebookEdit": "file_change",
    "WebSearch": "web_search",
    "WebFetch": "web_search",
    # Server-side tools (`server_tool_use` blocks) use the API's lower-case names.
    "web_search": "web_search",
    "web_fetch": "web_search",
}


def tool_kind(name: str) -> ToolKind:
    """Return the unified kind of a Claude Code tool name."""
    if name.startswith("mcp__"):
        return "mcp"
    return _TOOL_KINDS.get(name, "other")


def plan_from_todos(tool_input: dict[str, Any]) -> PlanUpdated | None:
    """Return the plan a ``TodoWrite`` input states, or None when it does not fit the schema.

    The CLI refuses such an input too (an ``is_error`` tool_result), so no plan is lost.
    """
    todos = tool_input.get("todos")
    if not isinstance(todos, list):
        return None
    entries: list[PlanEntry] = []
    for todo in todos:
        if not isinstance(todo, dict):
            return None
        content, status = todo.get("content"), todo.get("status")
        if not isinstance(content, str) or status not in _PLAN_STATUSES:
            return None
        entries.append(PlanEntry(text=content, status=status))
    return PlanUpdated(entries=entries)
