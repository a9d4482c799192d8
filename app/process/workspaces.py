"""Workspace confinement: a session's workspace must resolve inside a configured root, and
must still be that same directory whenever a CLI is started in it or pointed at it."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from app.errors import WorkspaceRejected

log = logging.getLogger(__name__)


def lexical_problem(requested: str, what: str = "workspace") -> str | None:
    """What is wrong with ``requested`` as written (before it is resolved), or None: it must be
    absolute, with no ``..`` segment and no NUL byte (the API document's ``Workspace`` pattern
    states the same rules). ``what`` names the field in the answer."""
    if "\x00" in requested:
        return f"{what} contains a NUL byte"
    path = Path(requested)
    if not path.is_absolute():
        return f"{what} must be an absolute path inside a configured root"
    if ".." in path.parts:
        return f"{what} must not contain '..' segments"
    return None


def resolve_workspace(
    requested: str,
    roots: Sequence[Path],
    *,
    reserved: Sequence[Path] = (),
    what: str = "workspace",
) -> Path:
    """The real path of ``requested`` if it is an existing directory inside one of ``roots``
    and inside none of ``reserved`` (the gateway's own directories, real paths).

    ``requested`` must be absolute and free of ``..`` segments and NUL bytes; symlinks are
    followed before the check, so a link that points out of every root is refused. Raises
    ``WorkspaceRejected`` saying what to change (``what`` names the field).
    """
    problem = lexical_problem(requested, what)
    if problem is not None:
        raise WorkspaceRejected(problem, workspace=requested[:200], roots=[str(r) for r in roots])
    real = Path(os.path.realpath(requested))
    for root in roots:
        real_root = os.path.realpath(root)
        if os.path.commonpath([real_root, real]) == real_root:
            break
    else:
        raise WorkspaceRejected(
            f"{what} is outside every configured root (after resolving symlinks)",
            workspace=requested,
            roots=[str(r) for r in roots],
        )
    for own in reserved:
        if os.path.commonpath([own, real]) == str(own):
            raise WorkspaceRejected(
                f"{what} lies inside the gateway's own directory {own} (its data, the CLI "
                "homes or the sessions' worktrees); name a directory outside it",
                workspace=requested,
            )
    try:
        directory = real.is_dir()
    except OSError as exc:  # a component over the file system's name limit, a loop, …
        raise WorkspaceRejected(
            f"{what} cannot be looked up: {exc.strerror or exc}", workspace=requested[:200]
        ) from None
    if not directory:
        raise WorkspaceRejected(f"{what} is not an existing directory", workspace=requested)
    return real


class WorkspaceMoved(Exception):
    """A checked workspace is no longer the directory it was (``detail`` says what changed).

    ``missing``: it (or a directory above it) no longer exists or is no longer a directory,
    rather than having been replaced by a symlink or left the roots.
    """

    def __init__(self, detail: str, *, missing: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.missing = missing


# O_PATH: only search permission is needed along the path, as for chdir.
_DIRECTORY_FLAGS = (
    os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
)


def open_confined(workspace: Path, roots: Sequence[Path]) -> int:
    """A close-on-exec descriptor of the directory at ``workspace``, owned by the caller.

    ``workspace`` is the real path ``resolve_workspace`` returned when the session was
    created. It must still lie inside one of ``roots`` (after resolving them), and it is
    opened one component at a time from ``/`` without following any symlink, so the
    descriptor names the directory that real path leads to now: a component replaced by a
    symlink, even one pointing back inside a root, is refused. Raises ``WorkspaceMoved``.
    """
    path = str(workspace)
    if "\x00" in path or not workspace.is_absolute() or ".." in workspace.parts:
        raise WorkspaceMoved(f"{path[:200]!r} is not an absolute path without '..' segments")
    if not _inside_a_root(path, roots):
        raise WorkspaceMoved(f"{path} is outside every configured root")
    fd = os.open("/", _DIRECTORY_FLAGS)
    try:
        walked = Path("/")
        for part in workspace.parts[1:]:
            walked /= part
            try:
                child = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _moved(walked, part, fd, exc) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_confined(workspace: Path, roots: Sequence[Path]) -> None:
    """Raise ``WorkspaceMoved`` unless ``open_confined(workspace, roots)`` would succeed.

    For a workspace handed on by path (to a shared CLI server): the server resolves the
    path again itself, so a swap after this check is not covered.
    """
    os.close(open_confined(workspace, roots))


def _inside_a_root(path: str, roots: Sequence[Path]) -> bool:
    for root in roots:
        real_root = os.path.realpath(root)
        if os.path.commonpath([real_root, path]) == real_root:
            return True
    return False


def _moved(walked: Path, part: str, parent_fd: int, exc: OSError) -> WorkspaceMoved:
    """Say why ``part`` (reached as ``walked``) under the open directory ``parent_fd`` failed."""
    try:
        st = os.stat(part, dir_fd=parent_fd, follow_symlinks=False)
    except OSError:
        return WorkspaceMoved(f"{walked} no longer exists", missing=True)
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(part, dir_fd=parent_fd)
        except OSError:
            target = "?"
        return WorkspaceMoved(f"{walked} was replaced by a symlink (to {target})")
    if not stat.S_ISDIR(st.st_mode):
        return WorkspaceMoved(f"{walked} is no longer a directory", missing=True)
    return WorkspaceMoved(f"cannot open {walked}: {exc.strerror or exc}")


def recheck_workspace(
    session_id: str, workspace: str, roots: Sequence[Path], *, reserved: Sequence[Path] = ()
) -> None:
    """Before a turn can spawn or drive a CLI: the workspace still resolves to the real
    path it had at creation, inside a root and outside ``reserved`` (a directory swapped for
    a symlink is refused).
    """
    try:
        resolved = resolve_workspace(workspace, roots, reserved=reserved)
    except WorkspaceRejected as exc:
        raise WorkspaceRejected(
            f"the session's workspace no longer resolves inside a configured root "
            f"({exc.detail}); the turn was not started",
            workspace=workspace,
        ) from None
    if str(resolved) != workspace:
        log.warning(
            "session %s: workspace %s now resolves to %s; turn refused",
            session_id,
            workspace,
            resolved,
        )
        raise WorkspaceRejected(
            "the session's workspace now resolves to another directory (it was replaced "
            "by a symlink); the turn was not started",
            workspace=workspace,
        )
