"""How Claude Code tool calls look in the event model: their kind."""

from __future__ import annotations

from app.events import ToolKind

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
