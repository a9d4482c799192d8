"""The ``[snapshots]`` section of the configuration: the gateway's own record of each
session's workspace, taken at every turn's start and end (app/process/snapshots/).

The record is a Git directory of the gateway's own per session, under ``dir`` (default
``<data_dir>/snapshots``); replicas must share it as they share ``sandbox.homes_dir``. A
workspace over ``max_files`` or ``max_bytes`` (what ``.gitignore`` ignores left out) is
refused at session creation; one that grows past them is not recorded for that turn, and the
turn says so with a ``warning``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class SnapshotSettings(BaseModel):
    """How the workspaces are recorded, and how large one may be."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Record every workspace at each turn's start and end (``GET …/changes``, revert, the
    ``changes`` of ``turn.completed``). Needs Git 2.32 or later (``git``): the gateway does
    not start without it while this is on (``doctor`` checks it)."""
    dir: Path | None = None
    """Where each session's record is kept (default ``<data_dir>/snapshots``); hidden from
    every agent like the rest of the gateway's files. Replicas share it, as they share
    ``sandbox.homes_dir``."""
    git: str = "git"
    """The Git executable (a path, or a name looked up on ``PATH``); 2.32 or later."""
    max_files: int = Field(default=100_000, ge=1)
    """Files a recorded workspace may hold (what ``.gitignore`` ignores is not counted): a
    larger one is refused at session creation (422 ``workspace_too_large``), and a turn whose
    workspace has grown past it is not recorded (a ``warning``; the turn goes on)."""
    max_bytes: int = Field(default=512 * 1024**2, ge=1024)
    """Bytes those files may hold together (the same refusals)."""
    timeout_s: float = Field(default=120.0, gt=0)
    """The longest one Git command of a snapshot, diff or revert may take."""
