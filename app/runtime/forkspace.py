"""A fork's workspace: a new directory holding the files as they were after the turn the
session is forked at.

    make_fork_workspace(settings, parent, child_id, at_turn)
      a session on a worktree: a new worktree of the same repository at the parent's base,
                               on ``agent/<child id>``, then ``fill_fork_files`` over it
      a plain workspace:       a new directory ``<worktrees_root>/<child id>``, then
                               ``fill_fork_files`` into it
    take_back_fork_workspace(made)  removes what it made (worktree and branch, or directory)

``fill_fork_files`` decides which files a fork gets: the files as they were when ``at_turn``
ended, from the session's snapshot store (app/runtime/history.py), replacing whatever the new
directory held (a worktree's checkout of the base); the Git link ``.git`` stays. Without that
record (snapshots off, or the workspace over their cap then) only a fork at the parent's
latest turn can be made, from the workspace as it is now; any other is a 409 saying why. A
fork's plain copy is the gateway's, like a worktree: it lives under the worktrees root and is
removed with its session.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from app.errors import SnapshotUnavailable, WorkspaceRejected
from app.records import SessionRecord, TurnRecord
from app.runtime.history import WorkspaceHistory
from app.runtime.worktrees import (
    BRANCH_PREFIX,
    Worktree,
    make_worktree,
    repository_of,
    take_back,
    worktree_path,
)
from app.settings import Settings

__all__ = [
    "ForkWorkspace",
    "fill_fork_files",
    "make_fork_workspace",
    "mirror",
    "take_back_fork_workspace",
]

log = logging.getLogger(__name__)

GIT_ENTRY = ".git"
"""A work tree's link to its repository: never copied from the parent, never removed from
the fork (each worktree has its own)."""


@dataclass(frozen=True, kw_only=True)
class ForkWorkspace:
    """The workspace made for a fork: a worktree, or a plain directory of the gateway's."""

    path: Path
    worktree: Worktree | None = None


async def make_fork_workspace(
    settings: Settings,
    parent: SessionRecord,
    *,
    child_id: str,
    at_turn: TurnRecord,
    latest: bool,
    history: WorkspaceHistory,
) -> ForkWorkspace:
    """Make the fork's workspace with the files after ``at_turn``; nothing is left behind
    when it fails (``RepositoryRejected``, ``BranchExists`` or ``WorkspaceRejected``)."""
    repository = repository_of(parent)
    if repository is not None and parent.base is not None:
        worktree = await make_worktree(
            settings,
            session_id=child_id,
            repository=repository,
            commit=parent.base,
            branch=BRANCH_PREFIX + child_id,
        )
        made = ForkWorkspace(path=worktree.path, worktree=worktree)
    else:
        path = worktree_path(settings, child_id)
        await asyncio.to_thread(_new_directory, settings, path)
        made = ForkWorkspace(path=path)
    try:
        await fill_fork_files(parent, at_turn, made.path, latest=latest, history=history)
    except BaseException:
        await take_back_fork_workspace(made)
        raise
    return made


async def fill_fork_files(
    parent: SessionRecord,
    at_turn: TurnRecord,
    destination: Path,
    *,
    latest: bool,
    history: WorkspaceHistory,
) -> None:
    """Make ``destination`` hold the files of ``parent``'s workspace as they were after
    ``at_turn`` (``latest``: the parent's last turn), its ``.git`` link left alone."""
    if history.enabled:
        try:
            await history.state(parent.id, at_turn, "end")
        except SnapshotUnavailable:
            if not latest:
                raise
        else:
            await asyncio.to_thread(_clear, destination)
            await history.files_after(parent.id, at_turn, destination)
            return
    elif not latest:
        raise SnapshotUnavailable(
            f"the files after turn {at_turn.id} were not recorded (snapshots are off): fork "
            "at the session's latest turn, or turn snapshots on",
            turn_id=at_turn.id,
        )
    await asyncio.to_thread(_copy_now, parent, destination)


def _clear(directory: Path) -> None:
    """Empty ``directory`` but for its ``.git``."""
    for entry in os.scandir(directory):
        if entry.name == ".git":
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _copy_now(parent: SessionRecord, destination: Path) -> None:
    source = Path(parent.workspace)
    if not source.is_dir():
        raise WorkspaceRejected(
            f"the workspace of session {parent.id} is gone; its files cannot be forked",
            workspace=parent.workspace,
        )
    try:
        mirror(source, destination)
    except OSError as exc:  # shutil.Error (an OSError) lists every file it could not copy
        first = exc.args[0][0] if isinstance(exc, shutil.Error) and exc.args[0] else exc
        raise WorkspaceRejected(
            f"the files of session {parent.id} could not be copied for its fork: {first}",
            workspace=parent.workspace,
        ) from None


async def take_back_fork_workspace(made: ForkWorkspace) -> None:
    """Undo ``make_fork_workspace``: the worktree, then its branch; or the directory."""
    if made.worktree is not None:
        await take_back(made.worktree)
    else:
        await asyncio.to_thread(shutil.rmtree, made.path, True)


def mirror(source: Path, destination: Path) -> None:
    """Make the tree under ``destination`` the same as under ``source`` (files, directories,
    symlinks as links, modes), leaving ``.git`` alone on both sides."""
    for directory, dirs, names in os.walk(destination, topdown=True):
        here = Path(directory)
        relative = here.relative_to(destination)
        top = relative == Path()
        for name in [*dirs]:
            theirs = source / relative / name
            if top and name == GIT_ENTRY:
                dirs.remove(name)
            elif not theirs.is_dir() or theirs.is_symlink():
                _remove(here / name)
                dirs.remove(name)
        for name in names:
            if top and name == GIT_ENTRY:
                continue
            theirs = source / relative / name
            if not (theirs.exists() or theirs.is_symlink()) or (
                theirs.is_dir() and not theirs.is_symlink()
            ):
                _remove(here / name)
    shutil.copytree(
        source,
        destination,
        symlinks=True,
        dirs_exist_ok=True,
        ignore=lambda directory, names: [GIT_ENTRY] if Path(directory) == source else [],
    )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _new_directory(settings: Settings, path: Path) -> None:
    settings.worktrees_root.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        raise WorkspaceRejected(
            f"{path} already exists; the fork's workspace was not made", workspace=str(path)
        ) from None
