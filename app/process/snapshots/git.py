"""Running Git for the snapshot store: argv only (never a shell), an environment built from
nothing (no ``GIT_*`` of the gateway's, no system or user configuration, no hooks, a fixed
identity), every run bounded in time and its process group killed when it overruns or its
caller goes away.

Git runs here as short-lived helper processes of the gateway itself, outside any sandbox:
they are not agent CLIs, so they are neither in the process runner's ledger nor under its
per-CLI limits (app/process/runner.py), but every one is waited for before its call returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Agent Gateway",
    "GIT_AUTHOR_EMAIL": "snapshots@agent-gateway.invalid",
    "GIT_COMMITTER_NAME": "Agent Gateway",
    "GIT_COMMITTER_EMAIL": "snapshots@agent-gateway.invalid",
}
STDERR_TAIL = 2000
"""What of a failed command's stderr its error keeps."""


class GitError(Exception):
    """A Git command of the snapshot store failed or overran its time."""

    def __init__(self, detail: str, *, returncode: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.returncode = returncode


class GitUnavailable(GitError):
    """The Git executable is missing or cannot be run."""


@dataclass(frozen=True, kw_only=True)
class Git:
    """One store's way of running Git: its directory, its work tree and its index."""

    executable: str
    git_dir: Path
    work_tree: Path | None = None
    index: Path | None = None
    home: Path
    """``HOME`` for Git: the snapshot root, never the operator's home."""
    excludes: Path | None = None
    """The workspace repository's own ``info/exclude``, honoured like its ``.gitignore``."""
    timeout_s: float = 120.0

    def environment(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_DIR": str(self.git_dir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_REPLACE_OBJECTS": "1",
            **IDENTITY,
        }
        if self.work_tree is not None:
            env["GIT_WORK_TREE"] = str(self.work_tree)
        if self.index is not None:
            env["GIT_INDEX_FILE"] = str(self.index)
        return env

    def argv(self, *args: str) -> list[str]:
        # The excludes file is a per-workspace choice, so it is given per command.
        excludes = str(self.excludes) if self.excludes is not None else os.devnull
        return [self.executable, "-c", f"core.excludesFile={excludes}", *args]

    async def run(
        self, *args: str, input: bytes | None = None, ok: tuple[int, ...] = (0,)
    ) -> bytes:
        """Run ``git args…``; its stdout. Raises ``GitError`` on another exit code."""
        async with self._started(args, stdin=input is not None) as process:
            out, err = await process.communicate(input)
        if process.returncode not in ok:
            said = err.decode(errors="replace").strip()[-STDERR_TAIL:]
            raise GitError(
                f"git {args[0]} failed (exit {process.returncode}): {said}",
                returncode=process.returncode,
            )
        return out

    @contextlib.asynccontextmanager
    async def stream(self, *args: str) -> AsyncIterator[asyncio.StreamReader]:
        """Run ``git args…`` and read its stdout as it comes; leaving early kills it."""
        async with self._started(args, stdin=False) as process:
            assert process.stdout is not None
            yield process.stdout
            await process.wait()
            if process.returncode != 0:
                raise GitError(f"git {args[0]} failed (exit {process.returncode})")

    @contextlib.asynccontextmanager
    async def _started(
        self, args: tuple[str, ...], *, stdin: bool
    ) -> AsyncIterator[asyncio.subprocess.Process]:
        """The running process, killed with its group if it overruns ``timeout_s`` or the
        caller leaves first; always reaped before this returns."""
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv(*args),
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.environment(),
                cwd=str(self.work_tree or self.home),
                start_new_session=True,
            )
        except OSError as exc:
            raise GitUnavailable(f"cannot run {self.executable}: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout_s):
                yield process
        except TimeoutError:
            raise GitError(
                f"git {args[0]} took longer than {self.timeout_s:g} s (snapshots.timeout_s)"
            ) from None
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await asyncio.shield(process.wait())


def with_index(git: Git, index: Path) -> Git:
    """``git`` on another index file (a scratch copy, a fresh one)."""
    return Git(
        executable=git.executable,
        git_dir=git.git_dir,
        work_tree=git.work_tree,
        index=index,
        home=git.home,
        excludes=git.excludes,
        timeout_s=git.timeout_s,
    )


def repository_excludes(workspace: Path) -> Path | None:
    """The ``info/exclude`` of the repository ``workspace`` is the top of, if it has one
    (a ``.git`` directory, or a ``.git`` file naming a worktree's directory)."""
    dot_git = workspace / ".git"
    if dot_git.is_dir():
        found = dot_git / "info" / "exclude"
        return found if found.is_file() else None
    try:
        first = dot_git.read_text(errors="replace").splitlines()[0] if dot_git.is_file() else ""
    except (OSError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    git_dir = Path(first.removeprefix("gitdir:").strip())
    if not git_dir.is_absolute():
        git_dir = workspace / git_dir
    try:
        common = (git_dir / "commondir").read_text().strip()
        git_dir = git_dir / common if not Path(common).is_absolute() else Path(common)
    except OSError:
        pass
    found = git_dir / "info" / "exclude"
    return found if found.is_file() else None
