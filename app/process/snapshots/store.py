"""The snapshot store: one Git directory of the gateway's own per session, with the
session's workspace as its work tree and an index of its own.

    <root>/<session id>/          a bare-layout Git directory (objects, refs, index, config)
        refs/turns/<turn id>/start   the workspace when the turn started
        refs/turns/<turn id>/end     … and when it ended
        notes                        what the agent's next prompt is told (a revert)

The user's own repository, index and configuration are never read or written: Git runs with
``GIT_DIR`` pointing here, no system or user configuration, no hooks, and a fixed identity
(app/process/snapshots/git.py). What the workspace's ``.gitignore`` files (and its
repository's ``info/exclude``) ignore is left out; a nested repository's ``.git`` never goes
in. Attributes that would rewrite bytes on the way in or out (line endings, filters,
``ident``, encodings) are switched off here, so a file comes back byte for byte with its
executable bit (symlinks as symlinks). Empty directories are not recorded.

Before anything is added the workspace is measured (``git ls-files``, then one ``lstat`` a
file, stopping as soon as a cap is passed): a workspace over ``max_files`` or ``max_bytes``
raises ``TooLarge`` and nothing is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from app.process.snapshots.diffs import Changes, FileChange, changes_from, parse_numstat
from app.process.snapshots.git import Git, GitError, GitUnavailable, repository_excludes, with_index

NOW: Final = "now"
"""A state to compare with: the workspace as it is now."""
MIN_GIT: Final = (2, 32)
"""``GIT_CONFIG_GLOBAL`` came with Git 2.32."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_STAT_BATCH = 16_384
_CONFIG = """\
[core]
\trepositoryformatversion = 0
\tbare = false
\tfilemode = true
\tsymlinks = true
\tignorecase = false
\tautocrlf = false
\tsafecrlf = false
\tlogallrefupdates = false
\thooksPath = /dev/null
\tfsmonitor = false
\tuntrackedCache = false
\tquotePath = false
\tbigFileThreshold = 512m
[gc]
\tauto = 0
[advice]
\taddEmbeddedRepo = false
\tdetachedHead = false
[diff]
\trenames = true
\tnoprefix = false
"""
_ATTRIBUTES = "* -text -eol -ident -filter -working-tree-encoding\n"
"""Highest-precedence attributes: no conversion of any file's bytes."""

Moment = Literal["start", "end"]


@dataclass(frozen=True, kw_only=True)
class Size:
    """What a workspace holds, as recorded: ``complete`` False when measuring stopped at a
    cap (then the figures are at least these)."""

    files: int
    bytes: int
    complete: bool = True
    nested: tuple[str, ...] = ()
    """Directories holding a repository of their own (``path/``), which are left out."""


class TooLarge(Exception):
    """The workspace holds more than the store records; ``detail`` says what and which
    setting raises the cap."""

    def __init__(self, size: Size, *, max_files: int, max_bytes: int) -> None:
        if size.files > max_files:
            what = f"more than {max_files} files (snapshots.max_files)"
        else:
            what = f"more than {max_bytes} bytes in its files (snapshots.max_bytes)"
        super().__init__(what)
        self.size = size
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.detail = (
            f"the workspace holds {what}, not counting what .gitignore ignores: ignore build "
            "output and dependencies in .gitignore, raise the setting, or turn snapshots off "
            "(snapshots.enabled = false)"
        )


def turn_ref(turn_id: str, moment: Moment) -> str:
    """The ref of a turn's recorded state at its start or end."""
    return f"refs/turns/{_checked(turn_id)}/{moment}"


def _checked(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name[:80]!r} is not a session or turn id")
    return name


class SnapshotStore:
    """Every session's record under ``root``; one operation at a time per session here."""

    def __init__(
        self,
        root: Path,
        *,
        git: str = "git",
        max_files: int = 100_000,
        max_bytes: int = 512 * 1024**2,
        timeout_s: float = 120.0,
    ) -> None:
        self.root = root
        self.git = git
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # --- where ---------------------------------------------------------------------------

    def path(self, session_id: str) -> Path:
        return self.root / _checked(session_id)

    def exists(self, session_id: str) -> bool:
        return (self.path(session_id) / "HEAD").is_file()

    def _git(self, git_dir: Path, workspace: Path | None, index: Path | None = None) -> Git:
        return Git(
            executable=self.git,
            git_dir=git_dir,
            work_tree=workspace,
            index=index if index is not None else git_dir / "index",
            home=self.root,
            excludes=None if workspace is None else repository_excludes(workspace),
            timeout_s=self.timeout_s,
        )

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    async def _ready(self, git_dir: Path) -> None:
        """Make the Git directory at ``git_dir`` if it is not there (atomically: a half-made
        one is never seen under its name)."""
        if (git_dir / "HEAD").is_file():
            return
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        making = self.root / f".making-{secrets.token_hex(8)}"
        try:
            await self._git(making, None).run("init", "--bare", "--quiet")
            shutil.rmtree(making / "hooks", ignore_errors=True)
            (making / "config").write_text(_CONFIG)
            (making / "info").mkdir(exist_ok=True)
            (making / "info" / "attributes").write_text(_ATTRIBUTES)
            (making / "description").unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another one made it meanwhile
                making.rename(git_dir)
        finally:
            shutil.rmtree(making, ignore_errors=True)

    # --- measuring -----------------------------------------------------------------------

    async def measure(self, workspace: Path, session_id: str | None = None) -> Size:
        """What ``workspace`` holds that a snapshot would record, stopping at a cap."""
        git_dir = self.path(session_id) if session_id is not None else self.root / ".probe"
        await self._ready(git_dir)
        git = self._git(git_dir, workspace)
        files = total = 0
        pending: list[bytes] = []
        nested: list[str] = []
        tail = b""
        listing = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        async with git.stream(*listing) as out:
            while chunk := await out.read(1 << 16):
                *names, tail = (tail + chunk).split(b"\0")
                for name in names:
                    # Git lists a directory with a repository of its own as `path/`.
                    if name.endswith(b"/"):
                        nested.append(os.fsdecode(name))
                    else:
                        pending.append(name)
                if len(pending) >= _STAT_BATCH:
                    found, size = await asyncio.to_thread(_count, workspace, pending)
                    files, total, pending = files + found, total + size, []
                    if files > self.max_files or total > self.max_bytes:
                        return Size(files=files, bytes=total, complete=False)
        found, size = await asyncio.to_thread(_count, workspace, pending)
        return Size(files=files + found, bytes=total + size, nested=tuple(nested))

    def over(self, size: Size) -> TooLarge | None:
        """The refusal for a workspace of ``size``, or None when the store records it."""
        if size.files > self.max_files or size.bytes > self.max_bytes:
            return TooLarge(size, max_files=self.max_files, max_bytes=self.max_bytes)
        return None

    async def check(self, workspace: Path, session_id: str | None = None) -> Size:
        """``measure``, raising ``TooLarge`` over a cap."""
        size = await self.measure(workspace, session_id)
        if (refusal := self.over(size)) is not None:
            raise refusal
        if session_id is not None:
            _leave_out(self.path(session_id), size.nested)
        return size

    # --- recording -----------------------------------------------------------------------

    async def record(self, session_id: str, workspace: Path, ref: str) -> str:
        """Record the workspace as it is under ``ref``; its commit id. ``TooLarge`` (nothing
        recorded) over a cap."""
        async with self._lock(session_id):
            git_dir = self.path(session_id)
            await self._ready(git_dir)
            await self.check(workspace, session_id)
            git = self._git(git_dir, workspace)
            tree = await self._add_all(git)
            commit = await self._commit(git, tree, ref)
            await git.run("update-ref", ref, commit)
            return commit

    @staticmethod
    async def _add_all(git: Git) -> str:
        await git.run("add", "--all")
        return (await git.run("write-tree")).decode().strip()

    @staticmethod
    async def _commit(git: Git, tree: str, message: str) -> str:
        out = await git.run("commit-tree", tree, input=message.encode() + b"\n")
        return out.decode().strip()

    async def resolve(self, session_id: str, ref: str) -> str | None:
        """The commit recorded under ``ref``, or None."""
        git_dir = self.path(session_id)
        if not (git_dir / "HEAD").is_file():
            return None
        git = self._git(git_dir, None)
        out = await git.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", ok=(0, 1))
        return out.decode().strip() or None

    async def _now(self, session_id: str, workspace: Path) -> str:
        """A tree of the workspace as it is, through a scratch copy of the session's index
        (the recorded states and the index the turns use are left as they are)."""
        git_dir = self.path(session_id)
        await self.check(workspace, session_id)
        scratch = git_dir / f"index.scratch-{secrets.token_hex(8)}"
        try:
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(shutil.copyfile, git_dir / "index", scratch)
            return await self._add_all(with_index(self._git(git_dir, workspace), scratch))
        finally:
            scratch.unlink(missing_ok=True)

    # --- reading -------------------------------------------------------------------------

    async def _pair(
        self, session_id: str, workspace: Path, base: str, target: str
    ) -> tuple[Git, str, str]:
        git = self._git(self.path(session_id), workspace)
        if target == NOW:
            target = await self._now(session_id, workspace)
        return git, base, target

    async def changes(self, session_id: str, workspace: Path, base: str, target: str) -> Changes:
        """The files changed from commit ``base`` to commit ``target`` (or ``NOW``)."""
        git, base, target = await self._pair(session_id, workspace, base, target)
        common = ("diff-tree", "-r", "-M", "-z", "--no-ext-diff", "--no-textconv")
        statuses = await git.run(*common, "--name-status", base, target)
        counts = await git.run(*common, "--numstat", base, target)
        return changes_from(statuses, counts)

    async def counts(self, session_id: str, workspace: Path, base: str, target: str) -> Changes:
        """``changes`` without the statuses (every file ``modified``): one Git command, for
        a summary's figures."""
        git, base, target = await self._pair(session_id, workspace, base, target)
        common = ("diff-tree", "-r", "-M", "-z", "--no-ext-diff", "--no-textconv")
        listed = parse_numstat(await git.run(*common, "--numstat", base, target))
        return Changes(
            files=tuple(
                FileChange(path=path, status="modified", additions=a, deletions=d, binary=b)
                for path, (a, d, b) in listed.items()
            )
        )

    async def patch(
        self, session_id: str, workspace: Path, base: str, target: str, *, binary: bool
    ) -> bytes:
        """The unified diff from ``base`` to ``target`` (or ``NOW``); with ``binary``, binary
        files as Git's binary patches, so ``git apply`` reproduces every file."""
        git, base, target = await self._pair(session_id, workspace, base, target)
        options = ["--binary", "--full-index"] if binary else []
        return await git.run(
            "diff-tree", "-p", "-M", "--no-ext-diff", "--no-textconv", "--no-color",
            *options, base, target,
        )  # fmt: skip

    # --- restoring -----------------------------------------------------------------------

    async def restore(self, session_id: str, workspace: Path, commit: str) -> Changes:
        """Put the workspace's files back as ``commit`` holds them: changed files rewritten,
        files it does not hold removed, what ``.gitignore`` ignores left alone. What it
        changed (from the workspace as it was to ``commit``). ``TooLarge`` over a cap
        (nothing changed)."""
        async with self._lock(session_id):
            git_dir = self.path(session_id)
            await self.check(workspace, session_id)
            git = self._git(git_dir, workspace)
            current = await self._add_all(git)  # the index is the workspace now
            common = ("diff-tree", "-r", "-M", "-z", "--no-ext-diff", "--no-textconv")
            statuses = await git.run(*common, "--name-status", current, commit)
            counts = await git.run(*common, "--numstat", current, commit)
            await git.run("read-tree", "--reset", "-u", commit)
            return changes_from(statuses, counts)

    async def materialize(self, session_id: str, commit: str, destination: Path) -> None:
        """Write the files ``commit`` holds into ``destination`` (a new or empty directory)."""
        await asyncio.to_thread(destination.mkdir, parents=True, exist_ok=True)
        git_dir = self.path(session_id)
        index = git_dir / f"index.export-{secrets.token_hex(8)}"
        try:
            git = with_index(self._git(git_dir, destination), index)
            await git.run("read-tree", "--reset", "-u", commit)
        finally:
            index.unlink(missing_ok=True)

    # --- notes and forgetting ------------------------------------------------------------

    def add_note(self, session_id: str, note: str) -> None:
        """Keep ``note`` for the session's next prompt (after any kept before)."""
        git_dir = self.path(session_id)
        git_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with (git_dir / "notes").open("a", encoding="utf-8") as file:
            file.write(note.rstrip("\n") + "\n\n")

    def take_notes(self, session_id: str) -> str | None:
        """The notes kept for the session's next prompt, now taken (None: none)."""
        notes = self.path(session_id) / "notes"
        try:
            text = notes.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        notes.unlink(missing_ok=True)
        return text.strip() or None

    def forget(self, session_ids: Iterable[str]) -> int:
        """Remove the records of ``session_ids``; how many there were."""
        removed = 0
        for session_id in session_ids:
            try:
                git_dir = self.path(session_id)
            except ValueError:
                continue
            if git_dir.is_dir():
                shutil.rmtree(git_dir, ignore_errors=True)
                removed += 1
        return removed


def _count(workspace: Path, names: list[bytes]) -> tuple[int, int]:
    """How many of ``names`` (relative to ``workspace``) exist, and their bytes."""
    found = size = 0
    lstat = os.lstat
    directory = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            try:
                size += lstat(name, dir_fd=directory).st_size
            except OSError:  # gone since the listing (or recorded, then deleted)
                continue
            found += 1
    finally:
        os.close(directory)
    return found, size


def _leave_out(git_dir: Path, nested: tuple[str, ...]) -> None:
    """Exclude the nested repositories from what ``git add`` takes (the store's own
    ``info/exclude``): a repository inside the workspace is never recorded, neither its
    ``.git`` nor its files."""
    lines = ["/" + re.sub(r"([\\*?\[\]!# ])", r"\\\1", path) for path in nested if "\n" not in path]
    exclude = git_dir / "info" / "exclude"
    text = "".join(line + "\n" for line in lines)
    try:
        if exclude.read_text() == text:
            return
    except FileNotFoundError:
        pass
    exclude.write_text(text)


async def git_problem(executable: str) -> str | None:
    """Why ``executable`` cannot serve as the snapshot store's Git (None: it can)."""
    git = Git(executable=executable, git_dir=Path(os.devnull), home=Path("/"), timeout_s=10.0)
    try:
        out = await git.run("--version")
    except GitUnavailable:
        return f"{executable} is not installed (Debian: apt-get install git)"
    except GitError as exc:
        return f"{executable} --version failed: {exc.detail}"
    match = re.search(rb"(\d+)\.(\d+)", out)
    if match is None or (int(match[1]), int(match[2])) < MIN_GIT:
        return f"{out.decode(errors='replace').strip()} is older than {'.'.join(map(str, MIN_GIT))}"
    return None
