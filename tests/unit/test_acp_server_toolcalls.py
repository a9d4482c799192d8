"""How a gateway tool call looks to an ACP client: its kind, title and locations, and for an
edit the diff, from the input each agent gives its file tools (as the gateway records it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from acp.schema import ToolCallStart
from pydantic import JsonValue

from app.api.acp.toolcalls import MAX_TITLE_CHARS, tool_call_view, tool_kind
from app.events import ToolKind
from app.providers.claude.tools import tool_kind as claude_kind
from app.providers.opencode.tools import tool_kind as opencode_kind


def shown(name: str, kind: ToolKind | None, tool_input: Mapping[str, Any], **kw: Any) -> Any:
    """The call as a ``tool_call`` update carries it (checked against the SDK's model)."""
    view = tool_call_view(name, kind, tool_input, cwd=kw.pop("cwd", None), **kw)
    start = ToolCallStart(
        session_update="tool_call",
        tool_call_id="t1",
        title=view.title,
        kind=view.kind,
        locations=view.locations or None,
        content=list(view.content) or None,
    )
    wire = start.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert (
        ToolCallStart.model_validate(wire).model_dump(by_alias=True, exclude_none=True, mode="json")
        == wire
    )
    return wire


def diff(path: str, old: str | None, new: str) -> dict[str, Any]:
    return {"type": "diff", "path": path, "newText": new, **({"oldText": old} if old else {})}


# --- kinds ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        # Claude Code's tools with the kind its provider gives them
        *[(n, "execute") for n in ("Bash", "BashOutput", "KillShell")],
        *[(n, "edit") for n in ("Edit", "MultiEdit", "Write", "NotebookEdit")],
        *[(n, "fetch") for n in ("WebSearch", "WebFetch", "web_search", "web_fetch")],
        *[(n, "read") for n in ("Read", "NotebookRead")],
        *[(n, "search") for n in ("Grep", "Glob", "LS")],
        *[(n, "think") for n in ("Task", "TodoWrite")],
        ("ExitPlanMode", "switch_mode"),
        ("mcp__github__create_issue", "other"),
    ],
)
def test_claude_codes_tools(name: str, kind: str) -> None:
    assert tool_kind(name, claude_kind(name)) == kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("bash", "execute"),
        *[(n, "edit") for n in ("edit", "write", "patch", "apply_patch", "multiedit")],
        *[(n, "fetch") for n in ("webfetch", "websearch", "codesearch")],
        ("read", "read"),
        *[(n, "search") for n in ("glob", "grep", "list")],
        *[(n, "think") for n in ("task", "todowrite", "todoread")],
        ("github_create_issue", "other"),
    ],
)
def test_opencodes_tools(name: str, kind: str) -> None:
    assert tool_kind(name, opencode_kind(name)) == kind


@pytest.mark.parametrize(
    ("name", "ours", "kind"),
    [
        # Codex's items (tool_started names them by type)
        ("command", "command", "execute"),
        ("file_change", "file_change", "edit"),
        ("web_search", "web_search", "fetch"),
        ("github.create_issue", "mcp", "other"),
        # ACP agents: the agent's name from _meta, else the ACP kind the gateway kept as name
        ("run_shell_command", "command", "execute"),
        ("read_file", "other", "read"),
        ("grep_search", "other", "search"),
        ("shell", "command", "execute"),
        ("read", "other", "read"),
        ("search", "other", "search"),
        ("think", "other", "think"),
        ("delete", "file_change", "delete"),
        ("move", "file_change", "move"),
        ("switch_mode", "other", "switch_mode"),
        ("other", "other", "other"),
    ],
)
def test_codex_and_acp_agents_tools(name: str, ours: ToolKind, kind: str) -> None:
    assert tool_kind(name, ours) == kind


@pytest.mark.parametrize(
    ("tool", "kind"),
    [
        ("Bash", "execute"),  # Claude Code
        ("command", "execute"),  # Codex
        ("file_change", "edit"),
        ("bash", "execute"),  # OpenCode's permission names
        ("edit", "edit"),
        ("webfetch", "fetch"),
        ("external_directory", "other"),
        ("Read", "read"),
    ],
)
def test_an_approval_names_only_its_tool_and_the_kind_comes_from_the_name(
    tool: str, kind: str
) -> None:
    assert tool_kind(tool, None) == kind


# --- titles and locations -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "tool_input", "title"),
    [
        ("Bash", "command", {"command": "make test", "description": "run"}, "make test"),
        ("shell", "command", {"command": ["git", "commit", "-m", "a b"]}, "git commit -m 'a b'"),
        ("Bash", "command", {"command": "cd x\nmake"}, "cd x …"),
        ("Bash", "command", {}, "Bash"),
        (
            "Edit",
            "file_change",
            {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"},
            "Edit /w/a.py",
        ),
        ("Write", "file_change", {"file_path": "/w/new.py", "content": "x"}, "Write /w/new.py"),
        ("Read", "other", {"file_path": "/w/a.py", "limit": 20}, "Read /w/a.py"),
        ("Grep", "other", {"pattern": "TODO", "path": "/w"}, "Grep TODO"),
        ("WebSearch", "web_search", {"query": "acp diff"}, "WebSearch acp diff"),
        ("web_search", "web_search", {"query": "acp diff"}, "web_search acp diff"),
        (
            "WebFetch",
            "web_search",
            {"url": "https://x.test/a", "prompt": "p"},
            "WebFetch https://x.test/a",
        ),
        ("Task", "other", {"description": "Find callers", "prompt": "long"}, "Task Find callers"),
        ("mcp__gh__list", "mcp", {"repo": "a/b"}, "mcp__gh__list"),
        # an ACP agent's call the gateway knows only by the agent's title
        ("fetch", "web_search", {"title": "Fetching https://x.test"}, "Fetching https://x.test"),
    ],
)
def test_a_title_says_what_the_call_does(
    name: str, kind: ToolKind, tool_input: dict[str, JsonValue], title: str
) -> None:
    assert shown(name, kind, tool_input)["title"] == title


def test_a_long_command_title_is_cut() -> None:
    title = shown("Bash", "command", {"command": "echo " + "x" * 500})["title"]
    assert len(title) == MAX_TITLE_CHARS
    assert title.endswith("…")


def test_the_agents_own_title_names_a_call_whose_input_names_no_command_or_file() -> None:
    # What runs, or which file changes, is what a user must see: a description does not say.
    assert shown("Bash", "command", {"command": "ls"}, title="List files")["title"] == "ls"
    edit = {"file_path": "a.py", "content": ""}
    assert shown("Write", "file_change", edit, title="Claude wants to write")["title"] == (
        "Write a.py"
    )
    issue = {"repo": "a/b", "body": "…"}
    assert shown("mcp__gh__create", "mcp", issue, title="Create an issue")["title"] == (
        "Create an issue"
    )


def test_only_the_files_a_call_acts_on_are_its_locations() -> None:
    def located(name: str, kind: ToolKind, tool_input: Mapping[str, Any]) -> list[str]:
        return [loc["path"] for loc in shown(name, kind, tool_input, cwd="/w").get("locations", [])]

    assert located("Read", "other", {"file_path": "src/a.py"}) == ["/w/src/a.py"]
    assert located("Edit", "file_change", {"file_path": "/abs/a.py", "new_string": ""}) == [
        "/abs/a.py"
    ]
    assert located("Grep", "other", {"pattern": "x", "path": "src"}) == []
    assert located("Bash", "command", {"command": "cat a.py", "path": "a.py"}) == []


# --- diffs ----------------------------------------------------------------------------------


def content(name: str, tool_input: Mapping[str, Any], cwd: str | None = "/w") -> Any:
    return shown(name, "file_change", tool_input, cwd=cwd).get("content")


def test_claude_codes_edits() -> None:
    assert content("Edit", {"file_path": "/w/a.py", "old_string": "x", "new_string": "y"}) == [
        diff("/w/a.py", "x", "y")
    ]
    assert content("Write", {"file_path": "/w/b.py", "content": "print()\n"}) == [
        diff("/w/b.py", None, "print()\n")
    ]
    multi = {
        "file_path": "/w/a.py",
        "edits": [
            {"old_string": "a", "new_string": "b"},
            {"old_string": "c", "new_string": "d", "replace_all": True},
        ],
    }
    assert content("MultiEdit", multi) == [diff("/w/a.py", "a", "b"), diff("/w/a.py", "c", "d")]
    # A notebook cell's new source is no file's text: no diff, the location still names it.
    notebook = {"notebook_path": "/w/n.ipynb", "new_source": "x = 1", "cell_id": "c1"}
    view = shown("NotebookEdit", "file_change", notebook)
    assert "content" not in view
    assert view["locations"] == [{"path": "/w/n.ipynb"}]


def test_opencodes_edits_and_its_permission_requests_unified_diff() -> None:
    assert content("edit", {"filePath": "src/a.ts", "oldString": "a", "newString": "b"}) == [
        diff("/w/src/a.ts", "a", "b")
    ]
    assert content("write", {"filePath": "/w/n.ts", "content": "x"}) == [diff("/w/n.ts", None, "x")]
    multi = {
        "filePath": "/w/a.ts",
        "edits": [{"filePath": "/w/a.ts", "oldString": "1", "newString": "2"}],
    }
    assert content("multiedit", multi) == [diff("/w/a.ts", "1", "2")]
    unified = "--- a.ts\n+++ a.ts\n@@ -1 +1 @@\n-a\n+b\n"
    [shown_diff] = content("edit", {"filepath": "/w/a.ts", "diff": unified, "patterns": []})
    assert shown_diff["content"]["text"] == f"/w/a.ts\n```diff\n{unified.rstrip()}\n```"


def test_other_agents_words_for_an_edit() -> None:
    # Gemini CLI's replace / write_file, Copilot CLI's edit / create
    assert content(
        "replace",
        {"file_path": "/w/a", "old_string": "x", "new_string": "y", "expected_replacements": 1},
    ) == [diff("/w/a", "x", "y")]
    assert content("write_file", {"file_path": "/w/b", "content": "z"}) == [diff("/w/b", None, "z")]
    assert content("edit", {"path": "/w/c", "old_str": "p", "new_str": "q"}) == [
        diff("/w/c", "p", "q")
    ]
    assert content("create", {"path": "/w/d", "file_text": "t"}) == [diff("/w/d", None, "t")]


def test_codex_file_changes() -> None:
    changes: list[JsonValue] = [
        {"path": "/w/new.txt", "kind": {"type": "add"}, "diff": "hello\n"},
        {"path": "/w/old.txt", "kind": {"type": "delete"}, "diff": "bye\n"},
        {"path": "/w/gone.txt", "kind": {"type": "delete"}, "diff": ""},
        {
            "path": "/w/a.txt",
            "kind": {"type": "update", "move_path": "/w/b.txt"},
            "diff": "@@ -1 +1 @@\n-a\n+b\n",
        },
    ]
    view = shown("file_change", "file_change", {"changes": changes}, cwd="/w")
    assert view["content"] == [
        diff("/w/new.txt", None, "hello\n"),
        diff("/w/old.txt", "bye\n", ""),
        {
            "type": "content",
            "content": {"type": "text", "text": "/w/b.txt\n```diff\n@@ -1 +1 @@\n-a\n+b\n```"},
        },
    ]
    assert [loc["path"] for loc in view["locations"]] == [
        "/w/new.txt",
        "/w/old.txt",
        "/w/gone.txt",
        "/w/b.txt",
    ]
    assert view["title"] == "Edit /w/new.txt, /w/old.txt, /w/gone.txt, /w/b.txt"


def test_the_codex_adapters_changes_by_path() -> None:
    changes: dict[str, JsonValue] = {
        "/w/n.txt": {"type": "add", "content": "n\n"},
        "/w/u.txt": {"type": "update", "unified_diff": "@@ -1 +1 @@\n-u\n+v\n", "move_path": None},
    }
    [added, updated] = content("edit", {"changes": changes})
    assert added == diff("/w/n.txt", None, "n\n")
    assert updated["content"]["text"].startswith("/w/u.txt\n```diff\n@@ -1 +1 @@")


def test_an_apply_patch_envelope_is_read_file_by_file() -> None:
    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Add File: docs/new.md",
            "+# Title",
            "+text",
            "*** Update File: src/app.py",
            "*** Move to: src/main.py",
            "@@ def main():",
            " keep",
            "-old()",
            "+new()",
            "@@",
            "-x",
            "+y",
            "*** Delete File: src/gone.py",
            "*** End Patch",
        ]
    )
    view = shown("apply_patch", "file_change", {"patchText": patch}, cwd="/w")
    assert view["content"] == [
        diff("/w/docs/new.md", None, "# Title\ntext\n"),
        diff("/w/src/main.py", "keep\nold()", "keep\nnew()"),
        diff("/w/src/main.py", "x", "y"),
    ]
    assert [loc["path"] for loc in view["locations"]] == [
        "/w/docs/new.md",
        "/w/src/main.py",
        "/w/src/gone.py",
    ]


def test_an_edit_whose_input_says_nothing_of_the_change_has_no_content() -> None:
    assert content("edit", {"file_path": "/w/a"}) is None
    assert content("apply_patch", {"patchText": "not a patch"}) is None
    assert content("file_change", {"changes": "?"}) is None
