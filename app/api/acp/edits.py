"""What a file-editing tool call changes, as ACP tool call content (pure, no I/O).

ACP shows an edit as ``diff`` content: a path, the text before (null for a new file) and the
text after. Each agent says what it edits in its own words, and the gateway keeps that input
as it came (``tool.started`` and ``approval.requested`` ``input``):

* Claude Code, the Claude adapter, CodeBuddy, Gemini CLI, Qwen Code: ``Edit`` / ``replace`` /
  ``edit`` ``{file_path, old_string, new_string}``, ``Write`` / ``write_file`` ``{file_path,
  content}``, ``MultiEdit`` ``{file_path, edits: [{old_string, new_string}]}``;
* OpenCode (and its ACP mode): ``edit`` ``{filePath, oldString, newString}``, ``write``
  ``{filePath, content}``, ``multiedit`` ``{filePath, edits}``, ``apply_patch`` / ``patch``
  ``{patchText}`` (the ``*** Begin Patch`` format); its permission requests carry ``{filepath,
  diff}`` with a unified diff;
* GitHub Copilot CLI: ``edit`` ``{path, old_str, new_str}``, ``create`` ``{path, file_text}``;
* Codex: ``{changes: [{path, kind: {type: add | delete | update, move_path}, diff}]}``, where
  ``diff`` is the new file's text for ``add``, the deleted file's text for ``delete`` and a
  unified diff for ``update`` (app-server v2 ``FileUpdateChange``); the Codex adapter's
  ``{changes: {path: {type, content | unified_diff}}}`` is read too.

A string replacement becomes a diff of the replaced snippet, as the Claude adapter sends it.
A unified diff carries only hunks, not the file: it is shown as text (the gateway does not
read the workspace to rebuild the file around it). A deleted file whose text is unknown gets
no diff (its location still names it).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from acp.schema import ContentToolCallContent, FileEditToolCallContent, TextContentBlock
from pydantic import JsonValue

__all__ = ["EditContent", "edit_content", "fenced", "named_paths", "resolved"]

EditContent = FileEditToolCallContent | ContentToolCallContent
"""One piece of an edit's content: a diff, or a unified diff shown as text."""

PATH_KEYS = ("file_path", "filePath", "filepath", "absolute_path", "path", "notebook_path")
"""Where a tool's input names the file it acts on, most specific first."""
_OLD_KEYS = ("old_string", "oldString", "old_str", "old_text", "oldText")
_NEW_KEYS = ("new_string", "newString", "new_str", "new_text", "newText")
_CONTENT_KEYS = ("content", "file_text")
_PATCH_KEYS = ("patchText", "patch", "input")
_PATCH_START = "*** Begin Patch"


@dataclass(frozen=True, slots=True)
class _Edit:
    path: str
    old: str | None
    new: str | None
    """None: the new text is unknown (a deleted file's text, a unified diff's hunks)."""
    unified: str | None = None


def edit_content(tool_input: Mapping[str, JsonValue], *, cwd: str | None) -> list[EditContent]:
    """The diffs (or unified diff texts) of what an edit tool's ``tool_input`` changes; []
    when it names none."""
    content: list[EditContent] = []
    for edit in _edits(tool_input):
        path = resolved(edit.path, cwd)
        if edit.new is not None:
            content.append(
                FileEditToolCallContent(
                    type="diff", path=path, old_text=edit.old, new_text=edit.new
                )
            )
        elif edit.unified:
            content.append(_text(f"{path}\n{fenced(edit.unified, 'diff')}"))
    return content


def named_paths(tool_input: Mapping[str, JsonValue], *, cwd: str | None) -> list[str]:
    """Every file ``tool_input`` names (edited, read, moved or deleted), in order, once each."""
    paths = [edit.path for edit in _edits(tool_input)]
    single = _first_str(tool_input, PATH_KEYS)
    if single is not None:
        paths.insert(0, single)
    return list(dict.fromkeys(resolved(path, cwd) for path in paths))


def resolved(path: str, cwd: str | None) -> str:
    """``path`` made absolute against ``cwd`` (ACP paths are absolute); as given without one."""
    if cwd is None or posixpath.isabs(path):
        return path
    return posixpath.normpath(posixpath.join(cwd, path))


def fenced(text: str, language: str = "") -> str:
    """``text`` as a Markdown code block whose fence no backtick run inside it closes."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.removesuffix(chr(10))}\n{fence}"


def _text(text: str) -> ContentToolCallContent:
    return ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=text))


def _first_str(values: Mapping[str, JsonValue], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = values.get(key)
        if isinstance(value, str):
            return value
    return None


def _edits(tool_input: Mapping[str, JsonValue]) -> Iterator[_Edit]:
    changes = tool_input.get("changes")
    if isinstance(changes, list | dict):
        yield from _codex_changes(changes)
        return
    patch = _first_str(tool_input, _PATCH_KEYS)
    if patch is not None and patch.lstrip().startswith(_PATCH_START):
        yield from _patch_edits(patch)
        return
    path = _first_str(tool_input, PATH_KEYS)
    if not path:
        return
    new = _first_str(tool_input, _NEW_KEYS)
    if new is not None:
        yield _Edit(path, _first_str(tool_input, _OLD_KEYS), new)
        return
    edits = tool_input.get("edits")
    if isinstance(edits, list):
        for raw in edits:
            if isinstance(raw, dict) and (new := _first_str(raw, _NEW_KEYS)) is not None:
                own = _first_str(raw, PATH_KEYS) or path
                yield _Edit(own, _first_str(raw, _OLD_KEYS), new)
        return
    whole = _first_str(tool_input, _CONTENT_KEYS)
    if whole is not None:
        yield _Edit(path, None, whole)
        return
    unified = tool_input.get("diff")
    if isinstance(unified, str) and unified:
        yield _Edit(path, None, None, unified)


def _codex_changes(changes: list[JsonValue] | dict[str, JsonValue]) -> Iterator[_Edit]:
    if isinstance(changes, dict):  # the Codex adapter: {path: {type, content | unified_diff}}
        for name, raw in changes.items():
            if isinstance(raw, dict):
                kind = raw.get("type")
                text = _first_str(raw, ("content", "unified_diff")) or ""
                yield _codex_change(name, kind, text, raw.get("move_path"))
        return
    for raw in changes:  # app-server v2: [{path, kind: {type, move_path}, diff}]
        if isinstance(raw, dict) and isinstance(path := raw.get("path"), str):
            kind = raw.get("kind")
            change: dict[str, JsonValue] = kind if isinstance(kind, dict) else {}
            text = _first_str(raw, ("diff",)) or ""
            yield _codex_change(path, change.get("type"), text, change.get("move_path"))


def _codex_change(path: str, kind: JsonValue, text: str, move_path: JsonValue) -> _Edit:
    if kind == "add":
        return _Edit(path, None, text)
    if kind == "delete":
        return _Edit(path, text, "") if text else _Edit(path, None, None)
    target = move_path if isinstance(move_path, str) and move_path else path
    return _Edit(target, None, None, text)


def _patch_edits(patch: str) -> Iterator[_Edit]:
    """The files of an ``apply_patch`` envelope: added whole, updated hunk by hunk (each hunk's
    context and removed lines against its context and added lines), deleted."""
    path: str | None = None
    mode = ""
    old: list[str] = []
    new: list[str] = []

    def hunk() -> Iterator[_Edit]:
        if path is not None and mode == "update" and (old or new):
            yield _Edit(path, "\n".join(old), "\n".join(new))
        elif path is not None and mode == "add":
            yield _Edit(path, None, "".join(f"{line}\n" for line in new))
        old.clear()
        new.clear()

    for line in patch.splitlines():
        header = line.strip()
        for marker, kind in (("Add File:", "add"), ("Update File:", "update")):
            if header.startswith(f"*** {marker}"):
                yield from hunk()
                path, mode = header.removeprefix(f"*** {marker}").strip(), kind
                break
        else:
            if header.startswith("*** Delete File:"):
                yield from hunk()
                path, mode = header.removeprefix("*** Delete File:").strip(), "delete"
                yield _Edit(path, None, None)
            elif header.startswith("*** Move to:") and mode == "update":
                path = header.removeprefix("*** Move to:").strip()
            elif line.startswith("@@") or header.startswith("***"):
                yield from hunk()
            elif mode == "add" and line.startswith("+"):
                new.append(line[1:])
            elif mode == "update" and line[:1] in ("+", "-", " ", ""):
                text = line[1:]
                if line[:1] != "+":
                    old.append(text)
                if line[:1] != "-":
                    new.append(text)
    yield from hunk()
