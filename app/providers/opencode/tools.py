"""How OpenCode tool calls look in the event model: their kind, and whether one was denied."""

from __future__ import annotations

import re

from app.events import ToolKind

__all__ = ["is_denial", "tool_kind"]

_TOOL_KINDS: dict[str, ToolKind] = {
    "bash": "command",
    "edit": "file_change",
    "write": "file_change",
    "patch": "file_change",
    "apply_patch": "file_change",
    "multiedit": "file_change",
    "webfetch": "web_search",
    "websearch": "web_search",
    "codesearch": "web_search",
}

# The tool error OpenCode writes when a permission is rejected by a reply ("The user rejected
# permission to use this specific tool call…") or by a deny rule ("The user has specified a
# rule which prevents you from using this specific tool call…"), 1.18.33.
_DENIAL_TEXT = re.compile(r"rejected permission|rule which prevents you", re.IGNORECASE)


def tool_kind(name: str) -> ToolKind:
    """Return the unified kind of an OpenCode tool name (MCP tools are ``other``).

    MCP tools are named ``<server>_<tool>``, which built-in names can also look like, so
    they cannot be told apart by name alone.
    """
    return _TOOL_KINDS.get(name.lower(), "other")


def is_denial(error: str) -> bool:
    """Whether a tool's error text says a permission refused the call."""
    return bool(_DENIAL_TEXT.search(error))
