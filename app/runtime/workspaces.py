"""Workspace confinement: a session's workspace must resolve inside a configured root."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from app.errors import WorkspaceRejected


def resolve_workspace(requested: str, roots: Sequence[Path]) -> Path:
    """The real path of ``requested`` if it is an existing directory inside one of ``roots``.

    ``requested`` must be absolute and free of ``..`` segments and NUL bytes; symlinks are
    followed before the check, so a link that points out of every root is refused. Raises
    ``WorkspaceRejected`` saying what to change.
    """
    if "\x00" in requested:
        raise WorkspaceRejected("workspace contains a NUL byte", workspace=requested[:200])
    path = Path(requested)
    if not path.is_absolute():
        raise WorkspaceRejected(
            "workspace must be an absolute path inside a configured root",
            workspace=requested,
            roots=[str(r) for r in roots],
        )
    if ".." in path.parts:
        raise WorkspaceRejected("workspace must not contain '..' segments", workspace=requested)
    real = Path(os.path.realpath(path))
    for root in roots:
        real_root = os.path.realpath(root)
        if os.path.commonpath([real_root, real]) == real_root:
            break
    else:
        raise WorkspaceRejected(
            "workspace is outside every configured root (after resolving symlinks)",
            workspace=requested,
            roots=[str(r) for r in roots],
        )
    if not real.is_dir():
        raise WorkspaceRejected("workspace is not an existing directory", workspace=requested)
    return real
