"""Codex tool items (commandExecution, fileChange, mcpToolCall, webSearch…) as tool events."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import JsonValue

from app.events import ToolCompleted, ToolKind, ToolStarted
from app.providers.output import tool_output
from app.providers.raw import as_dict, as_list

__all__ = ["TOOL_KINDS", "tool_completed", "tool_started"]

TOOL_KINDS: dict[str, ToolKind] = {
    "commandExecution": "command",
    "fileChange": "file_change",
    "mcpToolCall": "mcp",
    "webSearch": "web_search",
    "dynamicToolCall": "other",
}
"""The ThreadItem types that are tool calls, and their kind."""


_STATUSES: dict[object, Literal["completed", "failed", "denied"]] = {
    "failed": "failed",
    "declined": "denied",  # the user (or the gateway) said no
}


def tool_started(item: dict[str, Any]) -> ToolStarted:
    """``tool.started`` for a tool item (``TOOL_KINDS``); the input is what the tool acts on."""
    item_type = item["type"]
    name: str
    tool_input: dict[str, JsonValue]
    match item_type:
        case "commandExecution":
            name = "command"
            tool_input = {"command": item.get("command") or "", "cwd": item.get("cwd")}
        case "fileChange":
            name = "file_change"
            tool_input = {"changes": as_list(item.get("changes"))}  # path, kind, diff each
        case "mcpToolCall":
            server, tool = item.get("server") or "", item.get("tool") or ""
            name = f"{server}.{tool}"
            tool_input = {"server": server, "tool": tool, "arguments": item.get("arguments")}
        case "webSearch":
            name = "web_search"
            tool_input = {"query": item.get("query") or ""}
        case _:
            name = item.get("tool") or item_type
            tool_input = {"tool": name, "arguments": item.get("arguments")}
    return ToolStarted(tool_id=item["id"], name=name, kind=TOOL_KINDS[item_type], input=tool_input)


def tool_completed(item: dict[str, Any]) -> ToolCompleted:
    """``tool.completed`` for a finished tool item, its output capped at 64 KiB."""
    status = _STATUSES.get(item.get("status"), "completed")
    output: str | None = None
    if item["type"] == "commandExecution":
        output = tool_output(item.get("aggregatedOutput"))
    elif item["type"] == "mcpToolCall":
        error = as_dict(item.get("error")).get("message")
        if error:
            status, output = "failed", tool_output(error)
        else:
            output = tool_output(as_dict(item.get("result")).get("content"))
    elif item["type"] == "dynamicToolCall" and item.get("success") is False:
        status = "failed"
    exit_code = item.get("exitCode")
    if not isinstance(exit_code, int) or isinstance(exit_code, bool):
        exit_code = None
    return ToolCompleted(tool_id=item["id"], status=status, output=output, exit_code=exit_code)
