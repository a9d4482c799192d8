"""Claude Code's own fork of a thread, made by the CLI as the fork's process first starts.

    fork_thread(parent thread, keep N turns)
      └► the parent's transcript: <config dir>/projects/<cwd slug>/<thread>.jsonl
      └► the cut: the last entry of the N-th turn, i.e. the ``parentUuid`` of the (N+1)-th
         user prompt (None when the thread has no more than N: the whole thread)
      └► a fork whose sessions have different config dirs (each sandboxed session has a home
         of its own) gets the transcript up to the cut copied into its own
    the fork's first process: ``--resume=<parent thread> --fork-session
         --resume-session-at=<cut>``; the CLI writes the new thread and reports its id
         (``system/init``), which the gateway binds

Observed with Claude Code 2.1.332 against the stub: ``--resume-session-at`` (hidden from
``--help``; the Agent SDK's ``resumeSessionAt``) keeps the chain up to and including that
entry; ``--resume`` finds a thread in another project directory of the same config dir;
``--session-id`` beside ``--fork-session`` is ignored in stream-json mode (the new id is
the CLI's); nothing is written before the first prompt.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.providers.base import ForkFailed

__all__ = ["copy_transcript", "cut_point", "find_transcript", "is_prompt"]


def find_transcript(config_dir: Path, thread_id: str) -> Path | None:
    """The transcript of ``thread_id`` under ``config_dir`` (``~/.claude``), in whichever
    project directory the CLI put it."""
    name = Path(thread_id).name + ".jsonl"
    projects = config_dir / "projects"
    if not projects.is_dir():
        return None
    for project in sorted(projects.iterdir()):
        candidate = project / name
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def is_prompt(entry: dict[str, Any]) -> bool:
    """Whether a transcript entry is a user's prompt (not a tool's result, a meta note, a
    side chain's or a compaction's summary)."""
    if entry.get("type") != "user" or entry.get("isSidechain") or entry.get("isMeta"):
        return False
    if entry.get("isCompactSummary") or "toolUseResult" in entry:
        return False
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return True
    return isinstance(content, list) and not any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )


def cut_point(lines: Iterable[str], keep_turns: int) -> str | None:
    """The uuid of the last entry of the ``keep_turns``-th turn, or None when the transcript
    has no later prompt (the fork keeps it whole). Raises ``ForkFailed`` when it has fewer
    prompts than that."""
    prompts: list[dict[str, Any]] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash: the CLI skips it too
        if isinstance(entry, dict) and is_prompt(entry):
            prompts.append(entry)
            if len(prompts) > keep_turns:
                break
    if len(prompts) < keep_turns:
        raise ForkFailed(
            f"the thread's transcript holds {len(prompts)} prompts, fewer than the "
            f"{keep_turns} turns to keep"
        )
    if len(prompts) == keep_turns:
        return None
    cut = prompts[keep_turns].get("parentUuid")
    if not isinstance(cut, str) or not cut:
        raise ForkFailed(f"prompt {keep_turns + 1} of the thread's transcript has no parent entry")
    return cut


def copy_transcript(transcript: Path, config_dir: Path, cut: str | None) -> Path:
    """Copy ``transcript`` into ``config_dir``'s projects (same project directory name), up
    to and including the entry ``cut`` (None: whole); the copy's path."""
    target_dir = config_dir / "projects" / transcript.parent.name
    target_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = target_dir / transcript.name
    kept: list[str] = []
    with transcript.open(encoding="utf-8") as source:
        for line in source:
            kept.append(line if line.endswith("\n") else line + "\n")
            if cut is not None and f'"uuid":"{cut}"' in line.replace(" ", ""):
                try:
                    if json.loads(line).get("uuid") == cut:
                        break
                except ValueError:
                    continue
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as copy:
        copy.writelines(kept)
    return target
