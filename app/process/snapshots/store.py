"""The snapshot store: one Git directory of the gateway's own per session, with the
session's workspace as its work tree and an index of its own.

    <root>/<session id>/          a bare-layout Git directory (objects, refs, index, config)
        refs/turns/<turn id>/start   the workspace's tree when the turn started
        refs/turns/<turn id>/end     … and when it ended
        notes                        what the agent's next prompt is told (a revert)

A recorded state is a tree (no commit is made: nothing reads one); a ref names it.

The user's own repository, index and configuration are never read or written: Git runs with
``GIT_DIR`` pointing here, no system or user configuration, no hooks, and a fixed identity
(app/process/snapshots/git.py). What the workspace's ``.gitignore`` files (and its
repository's ``info/exclude``) ignore is left out; a nested repository (its ``.git`` and its
files) never goes in. Attributes that would rewrite bytes on the way in or out (line
endings, filters, ``ident``, encodings) are switched off here, so a file comes back byte for
byte with its executable bit (symlinks as symlinks). Empty directories are not recorded.

A record brings the session's index up to the workspace, hashing only what changed since the
last one, after checking the size cap (app/process/snapshots/staging.py): a workspace over
``max_files`` or ``max_bytes`` raises ``TooLarge`` and nothing is recorded. The store keeps,
per session, what it last staged (the tree, the size, recent refs) while the index file is
the one it wrote, so a record whose workspace did not change runs two read-only listings
and one ``update-ref``, and a turn that changed nothing is not diffed. Every operation runs
on a worker thread, never on the event loop's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from app.process.snapshots.diffs import Changes, FileChange, changes_from_raw, parse_numstat
from app.process.snapshots.git import (
    Git,
    GitError,
    GitUnavailable,
    Stop,
    off_loop,
    repository_excludes,
    with_index,
)
from app.process.snapshots.staging import Caps, Size, Staged, TooLarge, measure, stage

NOW: Final = "now"
"""A state to compare with: the workspace as it is now."""
MIN_GIT: Final = (2, 32)
"""``GIT_CONFIG_GLOBAL`` came with Git 2.32."""
WARM_SESSIONS: Final = 1024
"""Sessions whose last staged state the store keeps in memory (the most recent)."""
WARM_REFS: Final = 8
"""Refs a session's kept state remembers (its latest)."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
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
_DIFF = ("diff-tree", "-r", "-M", "-z", "--no-ext-diff", "--no-textconv")

Moment = Literal["start", "end"]


def turn_ref(turn_id: str, moment: Moment) -> str:
    """The ref of a turn's recorded state at its start or end."""
    return f"refs/turns/{_checked(turn_id)}/{moment}"


def _checked(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name[:80]!r} is not a session or turn id")
    return name


@dataclass(kw_only=True)
class _Warm:
    """What a session's index held when the store last wrote it."""

    index: tuple[int, int, int]
    """The index file's inode, size and mtime then: another writer changes them."""
    size: Size | None
    tree: str
    refs: OrderedDict[str, str] = field(default_factory=OrderedDict)


def _signature(index: Path) -> tuple[int, int, int] | None:
    try:
        st = index.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


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
        self._caps = Caps(max_files=max_files, max_bytes=max_bytes)
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._warm: OrderedDict[str, _Warm] = OrderedDict()

    # --- where ---------------------------------------------------------------------------

    def path(self, session_id: str) -> Path:
        return self.root / _checked(session_id)

    def exists(self, session_id: str) -> bool:
        return (self.path(session_id) / "HEAD").is_file()

    def _git(self, git_dir: Path, workspace: Path | None, stop: Stop | None) -> Git:
        """How to run Git on ``git_dir`` (blocking: it reads the workspace's excludes)."""
        return Git(
            executable=self.git,
            git_dir=git_dir,
            work_tree=workspace,
            index=git_dir / "index",
            home=self.root,
            excludes=None if workspace is None else repository_excludes(workspace),
            timeout_s=self.timeout_s,
            stop=stop,
        )

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    def _ready(self, git_dir: Path, stop: Stop) -> None:
        """Make the Git directory at ``git_dir`` if it is not there (atomically: a half-made
        one is never seen under its name)."""
        if (git_dir / "HEAD").is_file():
            return
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        making = self.root / f".making-{secrets.token_hex(8)}"
        try:
            self._git(making, None, stop).run("init", "--bare", "--quiet")
            shutil.rmtree(making / "hooks", ignore_errors=True)
            (making / "config").write_text(_CONFIG)
            (making / "info").mkdir(exist_ok=True)
            (making / "info" / "attributes").write_text(_ATTRIBUTES)
            (making / "description").unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another one made it meanwhile
                making.rename(git_dir)
        finally:
            shutil.rmtree(making, ignore_errors=True)

    # --- what the store keeps of a session -----------------------------------------------
    # The kept states are read and written on the event loop's thread; the work on the
    # worker thread gets a kept state as it was and returns what to keep.

    def _stage(self, warm: _Warm | None, git: Git, workspace: Path) -> Staged:
        """Stage the workspace in ``git``'s index (blocking), from ``warm`` if the index is
        still the one it describes."""
        assert git.index is not None
        if warm is not None and _signature(git.index) != warm.index:
            warm = None
        return stage(
            git,
            workspace,
            self._caps,
            known=None if warm is None else warm.size,
            tree=None if warm is None else warm.tree,
        )

    def _keep(
        self,
        session_id: str,
        signature: tuple[int, int, int] | None,
        tree: str,
        size: Size | None,
    ) -> _Warm | None:
        """Remember that the session's index, as ``signature`` says it is now, holds
        ``tree`` of ``size`` (None: not measured)."""
        previous = self._warm.pop(session_id, None)
        if signature is None:
            return None
        refs = previous.refs if previous is not None else OrderedDict()
        kept = self._warm[session_id] = _Warm(index=signature, size=size, tree=tree, refs=refs)
        while len(self._warm) > WARM_SESSIONS:
            self._warm.popitem(last=False)
        return kept

    # --- measuring -----------------------------------------------------------------------

    async def measure(self, workspace: Path, session_id: str | None = None) -> Size:
        """What ``workspace`` holds that a snapshot would record, stopping at a cap."""
        git_dir = self.path(session_id) if session_id is not None else self.root / ".probe"

        def work(stop: Stop) -> Size:
            self._ready(git_dir, stop)
            return measure(self._git(git_dir, workspace, stop), workspace, self._caps)

        return await off_loop(work)

    def over(self, size: Size) -> TooLarge | None:
        """The refusal for a workspace of ``size``, or None when the store records it."""
        return self._caps.refusal(size)

    # --- recording -----------------------------------------------------------------------

    async def record(
        self, session_id: str, workspace: Path, ref: str, *, keep: bool = False
    ) -> str:
        """Record the workspace as it is under ``ref``; its tree id. With ``keep``, a state
        already recorded under ``ref`` stays (and is returned). ``TooLarge`` (nothing
        recorded) over a cap."""
        async with self._lock(session_id):
            git_dir = self.path(session_id)
            warm = self._warm.get(session_id)

            def work(stop: Stop) -> tuple[Staged, str, tuple[int, int, int] | None]:
                self._ready(git_dir, stop)
                git = self._git(git_dir, workspace, stop)
                staged = self._stage(warm, git, workspace)
                recorded = staged.tree
                if not keep:
                    git.run("update-ref", ref, staged.tree)
                else:
                    try:
                        create = f"create {ref} {staged.tree}\n".encode()
                        git.run("update-ref", "--stdin", input=create)
                    except GitError:
                        # Recorded before (a turn resumed after a restart): that one stays.
                        found = _resolved(git, ref)
                        if found is None:
                            raise
                        recorded = found
                return staged, recorded, _signature(git_dir / "index")

            staged, recorded, signature = await off_loop(work)
            kept = self._keep(session_id, signature, staged.tree, staged.size)
            if kept is not None:
                kept.refs[ref] = recorded
                while len(kept.refs) > WARM_REFS:
                    kept.refs.popitem(last=False)
            return recorded

    async def resolve(self, session_id: str, ref: str) -> str | None:
        """The state recorded under ``ref`` (a tree id), or None."""
        git_dir = self.path(session_id)
        warm = self._warm.get(session_id)

        def work(stop: Stop) -> str | None:
            known = warm is not None and ref in warm.refs
            if known and warm is not None and _signature(git_dir / "index") == warm.index:
                return warm.refs[ref]
            if not (git_dir / "HEAD").is_file():
                return None
            return _resolved(self._git(git_dir, None, stop), ref)

        return await off_loop(work)

    async def _now(self, session_id: str, workspace: Path) -> str:
        """The tree of the workspace as it is, staged in a scratch copy of the session's
        index: the index the turns use is left to the replica that runs them (a read may
        come to any replica), and the recorded states stay as they are."""
        git_dir = self.path(session_id)
        warm = self._warm.get(session_id)

        def work(stop: Stop) -> str:
            self._ready(git_dir, stop)
            index = git_dir / "index"
            scratch = git_dir / f"index.scratch-{secrets.token_hex(8)}"
            try:
                before = _signature(index)
                with contextlib.suppress(FileNotFoundError):
                    shutil.copyfile(index, scratch)
                # What is kept of the index holds for the copy if it was not written meanwhile.
                same = warm is not None and before == warm.index == _signature(index)
                git = with_index(self._git(git_dir, workspace, stop), scratch)
                staged = stage(
                    git,
                    workspace,
                    self._caps,
                    known=warm.size if same and warm is not None else None,
                    tree=warm.tree if same and warm is not None else None,
                )
                return staged.tree
            finally:
                scratch.unlink(missing_ok=True)

        return await off_loop(work)

    # --- reading -------------------------------------------------------------------------

    async def _target(self, session_id: str, workspace: Path, target: str) -> str:
        return await self._now(session_id, workspace) if target == NOW else target

    async def _diff(self, session_id: str, workspace: Path, *args: str) -> bytes:
        git_dir = self.path(session_id)
        return await off_loop(lambda stop: self._git(git_dir, workspace, stop).run(*args))

    async def changes(self, session_id: str, workspace: Path, base: str, target: str) -> Changes:
        """The files changed from state ``base`` to state ``target`` (or ``NOW``)."""
        target = await self._target(session_id, workspace, target)
        if target == base:
            return Changes()
        listed = await self._diff(session_id, workspace, *_DIFF, "--raw", "--numstat", base, target)
        return changes_from_raw(listed)

    async def counts(self, session_id: str, workspace: Path, base: str, target: str) -> Changes:
        """``changes`` without the statuses (every file ``modified``): for a summary's
        figures."""
        target = await self._target(session_id, workspace, target)
        if target == base:
            return Changes()
        listed = parse_numstat(
            await self._diff(session_id, workspace, *_DIFF, "--numstat", base, target)
        )
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
        target = await self._target(session_id, workspace, target)
        options = ["--binary", "--full-index"] if binary else []
        return await self._diff(
            session_id, workspace,
            "diff-tree", "-p", "-M", "--no-ext-diff", "--no-textconv", "--no-color",
            *options, base, target,
        )  # fmt: skip

    # --- restoring -----------------------------------------------------------------------

    async def restore(self, session_id: str, workspace: Path, state: str) -> Changes:
        """Put the workspace's files back as ``state`` holds them: changed files rewritten,
        files it does not hold removed, what ``.gitignore`` ignores left alone. What it
        changed (from the workspace as it was to ``state``). ``TooLarge`` over a cap
        (nothing changed)."""
        async with self._lock(session_id):
            git_dir = self.path(session_id)
            warm = self._warm.get(session_id)

            def work(stop: Stop) -> tuple[Changes, tuple[int, int, int] | None]:
                self._ready(git_dir, stop)
                git = self._git(git_dir, workspace, stop)
                current = self._stage(warm, git, workspace).tree
                if current == state:
                    return Changes(), _signature(git_dir / "index")
                changes = changes_from_raw(git.run(*_DIFF, "--raw", "--numstat", current, state))
                git.run("read-tree", "--reset", "-u", state)
                return changes, _signature(git_dir / "index")

            self._warm.pop(session_id, None)
            changes, signature = await off_loop(work)
            # The index holds ``state`` now (with fresh lstat data); its size is not known.
            self._keep(session_id, signature, state, None)
            return changes

    async def materialize(self, session_id: str, state: str, destination: Path) -> None:
        """Write the files ``state`` holds into ``destination`` (a new or empty directory)."""
        git_dir = self.path(session_id)

        def work(stop: Stop) -> None:
            destination.mkdir(parents=True, exist_ok=True)
            index = git_dir / f"index.export-{secrets.token_hex(8)}"
            try:
                git = with_index(self._git(git_dir, destination, stop), index)
                git.run("read-tree", "--reset", "-u", state)
            finally:
                index.unlink(missing_ok=True)

        await off_loop(work)

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
            self._warm.pop(session_id, None)
            if git_dir.is_dir():
                shutil.rmtree(git_dir, ignore_errors=True)
                removed += 1
        return removed


def _resolved(git: Git, ref: str) -> str | None:
    out = git.run("rev-parse", "--verify", "--quiet", f"{ref}^{{tree}}", ok=(0, 1))
    return out.decode().strip() or None


async def git_problem(executable: str) -> str | None:
    """Why ``executable`` cannot serve as the snapshot store's Git (None: it can)."""
    git = Git(executable=executable, git_dir=Path(os.devnull), home=Path("/"), timeout_s=10.0)
    try:
        out = await off_loop(lambda stop: git.run("--version"))
    except GitUnavailable:
        return f"{executable} is not installed (Debian: apt-get install git)"
    except GitError as exc:
        return f"{executable} --version failed: {exc.detail}"
    match = re.search(rb"(\d+)\.(\d+)", out)
    if match is None or (int(match[1]), int(match[2])) < MIN_GIT:
        return f"{out.decode(errors='replace').strip()} is older than {'.'.join(map(str, MIN_GIT))}"
    return None
