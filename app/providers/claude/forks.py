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
from collections.abc import Iterable
from typing import Any

from app.providers.base import ForkFailed

__all__ = ["cut_point", "is_prompt"]


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
