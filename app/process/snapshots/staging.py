"""Bringing a store's index up to its workspace, with the size cap checked before anything
is added (blocking: run from a worker thread, app/process/snapshots/git.py).

The index is the store's cache of the workspace: it keeps every recorded file's ``lstat``
data, so a later record hashes only what changed since. ``stage`` asks Git what that is in
two read-only passes, ``git diff-files`` (tracked files whose ``lstat`` data changed: edited,
re-moded, deleted, turned into a symlink or a directory; also files only touched, which are
hashed again once so their entry is fresh) and ``git ls-files --others --exclude-standard``
(new files ``.gitignore`` does not ignore; a directory holding a repository of its own comes
as ``path/`` and is left out), checks the cap on those, and hands exactly those paths to
``git update-index`` and then builds the tree (``git write-tree``). That is ``git add --all``
split in two, so that the cap is checked between the listing and the hashing.

The cap is checked on a bound, not a count: what the last record held (a ``Size``) plus
every listed file's size now and every new file; deleted files are not taken off. While the
bound is under the cap nothing else is measured; once it is not (or nothing is known, the
first record of a process), ``measure`` counts the whole workspace, stopping as soon as a cap
is passed, and only a workspace really over it is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from app.process.snapshots.git import Git

_STAT_BATCH = 16_384
_READ = 1 << 16


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


@dataclass(frozen=True, kw_only=True)
class Caps:
    """The most a recorded workspace may hold."""

    max_files: int
    max_bytes: int

    def passed(self, size: Size) -> bool:
        return size.files > self.max_files or size.bytes > self.max_bytes

    def refusal(self, size: Size) -> TooLarge | None:
        """The refusal for a workspace of ``size``, or None when it is recorded."""
        if self.passed(size):
            return TooLarge(size, max_files=self.max_files, max_bytes=self.max_bytes)
        return None


@dataclass(frozen=True, kw_only=True)
class Staged:
    """The index brought up to the workspace: the tree it holds now, and what the
    workspace holds (exactly, or a bound under the cap)."""

    tree: str
    size: Size
    wrote: bool
    """Whether the index file was written (False: nothing had changed)."""


def measure(git: Git, workspace: Path, caps: Caps) -> Size:
    """What ``workspace`` holds that a record would take, stopping at a cap."""
    files = total = 0
    pending: list[bytes] = []
    nested: list[str] = []
    tail = b""
    with git.stream("ls-files", "-z", "--cached", "--others", "--exclude-standard") as out:
        while chunk := out.read(_READ):
            *names, tail = (tail + chunk).split(b"\0")
            for name in names:
                # Git lists a directory with a repository of its own as `path/`.
                if name.endswith(b"/"):
                    nested.append(os.fsdecode(name))
                else:
                    pending.append(name)
            if len(pending) >= _STAT_BATCH:
                found, size = _count(workspace, pending)
                files, total, pending = files + found, total + size, []
                if caps.passed(Size(files=files, bytes=total)):
                    return Size(files=files, bytes=total, complete=False)
    found, size = _count(workspace, pending)
    return Size(files=files + found, bytes=total + size, nested=tuple(nested))


def checked(git: Git, workspace: Path, caps: Caps) -> Size:
    """``measure``, raising ``TooLarge`` over a cap."""
    size = measure(git, workspace, caps)
    if (refusal := caps.refusal(size)) is not None:
        raise refusal
    return size


def stage(git: Git, workspace: Path, caps: Caps, *, known: Size | None, tree: str | None) -> Staged:
    """Bring ``git``'s index up to ``workspace`` and build its tree. ``known`` is what the
    index held when it was last staged and ``tree`` its tree (None: not known; the
    workspace is then measured whole). ``TooLarge`` over a cap, with nothing added."""
    size = None if known is not None else checked(git, workspace, caps)
    changed = _names(git.run("diff-files", "-z", "--name-only", "--no-renames"))
    others = [
        name
        for name in _names(git.run("ls-files", "-z", "--others", "--exclude-standard"))
        if not name.endswith(b"/")
    ]
    if size is None:
        assert known is not None
        _, grown = _count(workspace, changed + others)
        bound = replace(known, files=known.files + len(others), bytes=known.bytes + grown)
        size = checked(git, workspace, caps) if caps.passed(bound) else bound
    if not changed and not others and tree is not None:
        return Staged(tree=tree, size=size, wrote=False)
    if changed or others:
        # What was tracked first: a file that became a directory leaves the index before
        # the files in it come in.
        listed = b"".join(name + b"\0" for name in changed + others)
        git.run("update-index", "--add", "--remove", "--replace", "-z", "--stdin", input=listed)
    tree = git.run("write-tree").decode().strip()
    return Staged(tree=tree, size=size, wrote=True)


def _names(output: bytes) -> list[bytes]:
    names = output.split(b"\0")
    if names and names[-1] == b"":
        names.pop()
    return names


def _count(workspace: Path, names: list[bytes]) -> tuple[int, int]:
    """How many of ``names`` (relative to ``workspace``) exist, and their bytes."""
    found = size = 0
    lstat = os.lstat
    directory = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            try:
                size += lstat(name, dir_fd=directory).st_size
            except OSError:  # gone since the listing (or deleted)
                continue
            found += 1
    finally:
        os.close(directory)
    return found, size
