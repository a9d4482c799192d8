"""A session's own Git worktree: checked, made, and removed with the session.

    POST /v1/sessions {repository, ref?, branch?}
      └► check_repository: inside a root, the top of a repository, ref → commit    (422)
      └► check_branch: a valid name (422) that does not exist yet (409)
      └► make_worktree: <worktrees_root>/<session id> on the new branch at the commit
           … the session is stored; should that fail, take_back: worktree, then branch
    DELETE, or retention forgets the session
      └► remove_worktree: ``git worktree remove --force``, ``git worktree prune``;
         the branch (and every commit on it) stays in the repository; a fork's plain copy
         (app/runtime/forkspace.py) is removed the same way

``make_worktree`` is the one way a worktree is made for a session (a fork makes its new
session's the same way). Git runs off the event loop, through ``app.process.gitrepo``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from app.errors import BranchExists, RepositoryRejected, WorkspaceRejected
from app.process import gitrepo
from app.process.gitrepo import GitFailed, Repository
from app.process.workspaces import recheck_workspace, resolve_workspace
from app.providers.sandboxing import hidden_paths
from app.records import SessionRecord
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

BRANCH_PREFIX = "agent/"
"""A session's branch is ``agent/<session id>`` unless the request names one."""


def reserved_paths(settings: Settings) -> tuple[Path, ...]:
    """The gateway's own directories (real paths), where no workspace or repository may lie:
    its data, the CLI homes, the sessions' worktrees."""
    worktrees = Path(os.path.realpath(settings.worktrees_root))
    return tuple(dict.fromkeys((*hidden_paths(settings), worktrees)))


def worktree_path(settings: Settings, session_id: str) -> Path:
    """Where the worktree of ``session_id`` is made (real path of the root)."""
    return Path(os.path.realpath(settings.worktrees_root)) / Path(session_id).name


@dataclass(frozen=True, kw_only=True)
class Worktree:
    """A session's worktree, as made."""

    repository: Repository
    path: Path
    branch: str
    base: str


class WorktreeColumns(TypedDict):
    """The columns of a session's row that name its worktree."""

    repository: str | None
    branch: str | None
    base: str | None
    git_dir: str | None


def worktree_columns(worktree: Worktree | None) -> WorktreeColumns:
    """What a session's row keeps of its worktree (``repository``, ``branch``, ``base``,
    ``git_dir``): all None for a session on a plain workspace."""
    if worktree is None:
        return WorktreeColumns(repository=None, branch=None, base=None, git_dir=None)
    return WorktreeColumns(
        repository=str(worktree.repository.path),
        branch=worktree.branch,
        base=worktree.base,
        git_dir=str(worktree.repository.git_dir),
    )


async def check_repository(
    requested: str, ref: str | None, settings: Settings
) -> tuple[Repository, str]:
    """The repository at ``requested`` (inside a workspace root, outside the gateway's own
    directories, the top of a work tree or a bare repository) and the commit ``ref`` names
    there (default ``HEAD``). Raises ``RepositoryRejected`` saying what to fix."""
    return await asyncio.to_thread(_check_repository, requested, ref, settings)


def _check_repository(
    requested: str, ref: str | None, settings: Settings
) -> tuple[Repository, str]:
    reserved = reserved_paths(settings)
    try:
        path = resolve_workspace(
            requested, settings.workspaces.roots, reserved=reserved, what="repository"
        )
    except WorkspaceRejected as exc:
        raise RepositoryRejected(exc.detail, repository=requested[:4096]) from None
    try:
        repository = gitrepo.open_repository(path)
    except GitFailed as exc:
        raise RepositoryRejected(exc.detail, repository=requested) from None
    if any(repository.git_dir.is_relative_to(own) for own in reserved):
        raise RepositoryRejected(
            f"the repository's Git directory {repository.git_dir} lies inside the gateway's "
            "own directories",
            repository=requested,
        )
    roots = [os.path.realpath(root) for root in settings.workspaces.roots]
    if not any(repository.git_dir.is_relative_to(root) for root in roots):
        raise RepositoryRejected(
            f"the repository's Git directory {repository.git_dir} is outside every configured "
            "root (its agent would need to write there)",
            repository=requested,
        )
    wanted = "HEAD" if ref is None else ref
    try:
        commit = gitrepo.resolve_commit(repository, wanted)
    except GitFailed as exc:
        raise RepositoryRejected(
            f"ref {wanted!r} does not name a commit in the repository"
            + (" (it has no commit yet)" if ref is None else ""),
            repository=requested,
            ref=wanted,
            git=exc.detail,
        ) from None
    return repository, commit


async def check_branch(repository: Repository, branch: str) -> None:
    """Refuse ``branch`` for a new worktree: 422 for a name git does not accept, 409 for one
    the repository has."""
    problem = await asyncio.to_thread(gitrepo.branch_problem, repository, branch)
    if problem is not None:
        raise RepositoryRejected(problem, branch=branch)
    if await asyncio.to_thread(gitrepo.branch_exists, repository, branch):
        raise BranchExists(
            f"branch {branch!r} already exists in {repository.path}; name a new one (`branch`),"
            " or leave it out for agent/<session id>",
            branch=branch,
        )


async def make_worktree(
    settings: Settings, *, session_id: str, repository: Repository, commit: str, branch: str
) -> Worktree:
    """Check out ``commit`` on a new ``branch`` at the worktree of ``session_id``; the
    branch must pass ``check_branch`` (checked again here). Nothing is left behind when it
    fails: ``BranchExists`` if another request took the branch meanwhile, else
    ``RepositoryRejected`` with git's words."""
    await check_branch(repository, branch)
    path = worktree_path(settings, session_id)
    await asyncio.to_thread(_prepare, settings, repository)
    try:
        await asyncio.to_thread(
            gitrepo.add_worktree, repository, path=path, branch=branch, commit=commit
        )
    except GitFailed as exc:
        if exc.detail.startswith("a branch named"):  # made by another request meanwhile
            raise BranchExists(
                f"branch {branch!r} already exists in {repository.path}; name a new one",
                branch=branch,
            ) from None
        await asyncio.to_thread(gitrepo.remove_worktree, repository, path)
        if await asyncio.to_thread(gitrepo.branch_exists, repository, branch):
            await asyncio.to_thread(gitrepo.delete_branch, repository, branch)
        raise RepositoryRejected(
            f"the worktree could not be made: {exc.detail}", repository=str(repository.path)
        ) from None
    log.info("worktree %s made on branch %s at %s", path, branch, commit[:12])
    return Worktree(repository=repository, path=path, branch=branch, base=commit)


def _prepare(settings: Settings, repository: Repository) -> None:
    # The sandbox shows the hooks directory read-only over the writable Git directory; it
    # must exist for that (git init makes it; a repository made otherwise may lack it).
    settings.worktrees_root.mkdir(mode=0o700, parents=True, exist_ok=True)
    (repository.git_dir / "hooks").mkdir(exist_ok=True)


async def take_back(worktree: Worktree) -> None:
    """Undo ``make_worktree`` for a session that could not be stored: the worktree, then the
    branch made for it."""
    await asyncio.to_thread(gitrepo.remove_worktree, worktree.repository, worktree.path)
    await asyncio.to_thread(gitrepo.delete_branch, worktree.repository, worktree.branch)


def repository_of(row: SessionRecord) -> Repository | None:
    """The repository ``row``'s worktree belongs to, as stored (None: a plain workspace); a
    fork makes its new session's worktree of it with ``make_worktree``."""
    if row.repository is None or row.git_dir is None:
        return None
    return Repository(path=Path(row.repository), git_dir=Path(row.git_dir))


async def remove_worktree(settings: Settings, row: SessionRecord) -> bool:
    """Remove the worktree of ``row`` (a session on one), or its fork's plain copy, if it is
    still there; a worktree's branch stays. Whether there was one to remove. A failure is
    logged, never raised: the session closes anyway, and the next close (or ``git worktree
    prune``) can finish the job."""
    repository = repository_of(row)
    if repository is None:
        return await asyncio.to_thread(remove_fork_copy, settings, row)
    path = worktree_path(settings, row.id)
    if Path(row.workspace) != path or not (path.exists() or path.is_symlink()):
        return False
    try:
        await asyncio.to_thread(gitrepo.remove_worktree, repository, path)
    except (GitFailed, OSError) as exc:
        log.warning("session %s: its worktree %s could not be removed: %s", row.id, path, exc)
        return False
    log.info(
        "session %s: worktree %s removed; branch %s kept in %s",
        row.id,
        path,
        row.branch,
        row.repository,
        extra={"session_id": row.id},
    )
    return True


def is_fork_copy(settings: Settings, row: SessionRecord) -> bool:
    """Whether ``row``'s workspace is a plain directory the gateway made for it (a fork's)."""
    return row.repository is None and Path(row.workspace) == worktree_path(settings, row.id)


def remove_fork_copy(settings: Settings, row: SessionRecord) -> bool:
    """Remove a fork's plain copy (``is_fork_copy``) if it is still there; whether it was."""
    if not is_fork_copy(settings, row):
        return False
    path = Path(row.workspace)
    if not path.is_dir() or path.is_symlink():
        return False
    try:
        shutil.rmtree(path)
    except OSError as exc:
        log.warning("session %s: its workspace copy %s could not be removed: %s", row.id, path, exc)
        return False
    log.info("session %s: workspace copy %s removed", row.id, path, extra={"session_id": row.id})
    return True


async def forget_worktrees(settings: Settings, store: Storage, session_ids: Iterable[str]) -> int:
    """Remove the worktrees of sessions retention forgot; how many there were."""
    removed = 0
    for session_id in session_ids:
        row = await store.get_session(session_id)
        if row is not None and await remove_worktree(settings, row):
            removed += 1
    return removed


def recheck_session_workspace(row: SessionRecord, settings: Settings) -> None:
    """Before a turn can spawn or drive a CLI: a plain workspace still resolves to itself
    inside a root and outside the gateway's own directories; a worktree still resolves to
    itself inside the worktrees root, and its repository's Git directory is still that
    directory (not swapped for a symlink the sandbox's bind would follow). Raises
    ``WorkspaceRejected``."""
    if is_fork_copy(settings, row):
        recheck_workspace(row.id, row.workspace, (settings.worktrees_root,))
        return
    if row.repository is None or row.git_dir is None:
        recheck_workspace(
            row.id, row.workspace, settings.workspaces.roots, reserved=reserved_paths(settings)
        )
        return
    recheck_workspace(row.id, row.workspace, (settings.worktrees_root,))
    real = os.path.realpath(row.git_dir)
    if real != row.git_dir or not os.path.isdir(real):
        raise WorkspaceRejected(
            f"the repository's Git directory {row.git_dir} is no longer that directory; the "
            "turn was not started",
            workspace=row.workspace,
        )
