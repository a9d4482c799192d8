"""The ``[sandbox]`` section of the configuration: how agent processes are confined
(app/process/sandbox.py, app/providers/sandboxing.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

SandboxMode = Literal["bwrap", "none"]


class SandboxSettings(BaseModel):
    """How agent processes are confined (app/process/sandbox.py)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["auto", "bwrap", "none"] = "auto"
    """``bwrap``: every agent process runs in a bubblewrap sandbox that shows it its own
    workspace and home and none of the gateway's files; a provider whose sandbox cannot be
    made is unavailable. ``none``: agents run as the gateway's user with its view of the
    machine. ``auto`` (the default): ``bwrap`` where it works, else ``none``, with the reason
    in ``doctor``, ``/readyz`` and ``GET /v1/providers``."""
    bwrap: str = "bwrap"
    """The bubblewrap executable (a path, or a name looked up on ``PATH``)."""
    homes_dir: Path | None = None
    """Where each session's own CLI home is created (default ``<data_dir>/homes``). Replicas
    of one gateway must share it, as they share their CLIs' threads."""
    read_only: list[Path] = []
    """More paths a sandboxed agent may read (a toolchain outside ``/usr``, say)."""
    read_write: list[Path] = []
    """More paths a sandboxed agent may write (a cache shared by every session, say)."""
