"""A gateway tool call as an ACP client shows it: its kind, a short title, the files it
touches and, for an edit, what it changes (pure, no I/O).

The kind comes from the event's own kind where that says enough (``command`` → ``execute``,
``file_change`` → ``edit``, ``web_search`` → ``fetch``, as the Claude adapter files web
searches and fetches, ``mcp`` → ``other``), else from the tool's name: reads, searches,
planning tools. An approval names only the tool, so its kind is read from the name alone
(Claude Code's ``Bash``, Codex's ``command`` / ``file_change``, OpenCode's permission names,
an ACP agent's tool names or ACP kinds, which the gateway's ACP client keeps as names).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from acp.schema import FileEditToolCallContent, ToolCallLocation
from acp.schema import ToolKind as AcpToolKind
from pydantic import JsonValue

from app.api.acp.edits import EditContent, edit_content, named_paths
from app.events import ToolKind

__all__ = ["MAX_TITLE_CHARS", "AcpToolKind", "ToolCallView", "tool_call_view", "tool_kind"]

MAX_TITLE_CHARS = 160
"""A title longer than this (a long command) is cut, with an ellipsis."""

_KINDS: Mapping[ToolKind, AcpToolKind] = {
    "command": "execute",
    "file_change": "edit",
    "web_search": "fetch",
    "mcp": "other",
    "other": "other",
}

_NAMED: Mapping[str, AcpToolKind] = {
    **dict.fromkeys(
        ("bash", "bashoutput", "killshell", "shell", "command", "execute", "exec_command"),
        "execute",
    ),
    "run_shell_command": "execute",
    **dict.fromkeys(
        ("edit", "multiedit", "write", "write_file", "replace", "create", "notebookedit"), "edit"
    ),
    **dict.fromkeys(("file_change", "patch", "apply_patch"), "edit"),
    "delete": "delete",
    "move": "move",
    **dict.fromkeys(("read", "read_file", "read_many_files", "notebookread", "view"), "read"),
    **dict.fromkeys(("glob", "grep", "grep_search", "search_file_content", "search"), "search"),
    **dict.fromkeys(("ls", "list", "list_directory", "glob_search"), "search"),
    **dict.fromkeys(("webfetch", "web_fetch", "fetch", "websearch", "web_search"), "fetch"),
    **dict.fromkeys(("google_web_search", "codesearch"), "fetch"),
    **dict.fromkeys(
        ("think", "task", "todowrite", "todo_write", "todoread", "update_plan"), "think"
    ),
    **dict.fromkeys(("exitplanmode", "switch_mode"), "switch_mode"),
}
"""Tool names (lower case) that say their kind: the CLIs' own, and ACP's kinds."""

_VERBS: Mapping[AcpToolKind, str] = {
    "read": "Read",
    "edit": "Edit",
    "delete": "Delete",
    "move": "Move",
}
_LOCATED: frozenset[AcpToolKind] = frozenset(_VERBS)
"""Kinds whose paths are the files they act on (a search's path is where it looks)."""
_TARGET_KEYS = ("pattern", "query", "url", "description", "prompt", "title")
_COMMAND_KEYS = ("command", "cmd")


@dataclass(frozen=True, kw_only=True)
class ToolCallView:
    """What an ACP client is told about a tool call when it starts or asks permission."""

    kind: AcpToolKind
    title: str
    locations: list[ToolCallLocation]
    content: list[EditContent]
    """For an edit: its diffs (or unified diffs as text); otherwise empty."""

    @property
    def has_diff(self) -> bool:
        return any(isinstance(item, FileEditToolCallContent) for item in self.content)


def tool_kind(name: str, kind: ToolKind | None) -> AcpToolKind:
    """The ACP kind of a tool called ``name`` of our ``kind`` (None: only the name is known)."""
    named = _NAMED.get(name.lower())
    if kind is None or kind == "other":
        return named or "other"
    if kind == "file_change" and named in ("delete", "move"):
        return named
    return _KINDS[kind]


def tool_call_view(
    name: str,
    kind: ToolKind | None,
    tool_input: Mapping[str, JsonValue],
    *,
    cwd: str | None,
    title: str | None = None,
) -> ToolCallView:
    """The kind, title, locations and content of a call.

    The title names the command a call runs or the files it acts on; else it is ``title``
    (the agent's own, which may be a sentence about the call rather than the call itself),
    else the tool's name and what it looks for. ``cwd`` is the session's workspace: relative
    paths are resolved against it.
    """
    acp_kind = tool_kind(name, kind)
    content = edit_content(tool_input, cwd=cwd) if acp_kind in ("edit", "delete") else []
    located = acp_kind in _LOCATED
    paths = named_paths(tool_input, cwd=cwd) if located else []
    specific = _specific_title(acp_kind, tool_input, content)
    return ToolCallView(
        kind=acp_kind,
        title=specific or _line(title or "") or _title(name, tool_input),
        locations=[ToolCallLocation(path=path) for path in paths],
        content=content,
    )


def _specific_title(
    kind: AcpToolKind, tool_input: Mapping[str, JsonValue], content: list[EditContent]
) -> str | None:
    """The command the call runs, or the verb and files it acts on; None when neither."""
    if kind == "execute" and (command := _command(tool_input)):
        return _line(command)
    verb = _VERBS.get(kind)
    paths = named_paths(tool_input, cwd=None) if verb else []
    if not (verb and paths):
        return None
    diffs = [item for item in content if isinstance(item, FileEditToolCallContent)]
    whole = diffs and len(diffs) == len(content) and all(d.old_text is None for d in diffs)
    if kind == "edit" and whole:
        verb = "Write"  # every file written whole: new, or replaced
    return _line(f"{verb} {', '.join(paths)}")


def _title(name: str, tool_input: Mapping[str, JsonValue]) -> str:
    only_title = tool_input.get("title")
    if isinstance(only_title, str) and len(tool_input) == 1:
        return _line(only_title)  # an ACP agent's call the gateway knows by its title alone
    for key in _TARGET_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return _line(f"{name} {value}")
    return _line(name) or "tool"


def _command(tool_input: Mapping[str, JsonValue]) -> str | None:
    for key in _COMMAND_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return shlex.join(str(v) for v in value)
    return None


def _line(text: str) -> str:
    """The first line of ``text``, cut to ``MAX_TITLE_CHARS``; an ellipsis says it was cut."""
    stripped = text.strip()
    line = stripped.split("\n", 1)[0].strip()
    if len(line) > MAX_TITLE_CHARS:
        return line[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return line if line == stripped else line + " …"
