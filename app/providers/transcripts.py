"""Claude Code's transcripts: where a thread's lies under a config dir, and a copy of one
into another config dir.

Both the native provider (app/providers/claude) and the Claude ACP adapter, which runs Claude
Code (app/providers/acp), fork a thread into a session whose sandbox has a config dir of its
own: the fork's CLI finds the parent's thread only once its transcript is copied there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["copy_transcript", "find_transcript"]


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
