"""What changed between two recorded states of a workspace, read from ``git diff-tree``'s
``-z`` output (pure: no process, no file). One ``git diff-tree -r -M -z --raw --numstat``
gives both listings, the raw one (each entry headed by ``:``) first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FileStatus = Literal["added", "modified", "deleted", "renamed"]

_STATUSES: dict[str, FileStatus] = {
    "A": "added",
    "M": "modified",
    "T": "modified",  # a file became a symlink, or the other way round
    "D": "deleted",
    "R": "renamed",
}


@dataclass(frozen=True, kw_only=True)
class FileChange:
    """One changed file: ``path`` is where it is now (where it was, for a deleted one);
    ``old_path`` where a renamed file was. A binary file counts no lines."""

    path: str
    status: FileStatus
    old_path: str | None = None
    additions: int = 0
    deletions: int = 0
    binary: bool = False


@dataclass(frozen=True, kw_only=True)
class Changes:
    """The changed files between two states, by path."""

    files: tuple[FileChange, ...] = ()

    @property
    def additions(self) -> int:
        return sum(change.additions for change in self.files)

    @property
    def deletions(self) -> int:
        return sum(change.deletions for change in self.files)


def _fields(output: bytes) -> list[str]:
    text = output.decode("utf-8", errors="surrogateescape")
    fields = text.split("\0")
    if fields and fields[-1] == "":
        fields.pop()
    return fields


def parse_name_status(output: bytes) -> list[tuple[FileStatus, str, str | None]]:
    """``git diff-tree -r -M -z --name-status``: ``(status, path, old_path)`` per file."""
    fields = _fields(output)
    found: list[tuple[FileStatus, str, str | None]] = []
    at = 0
    while at < len(fields):
        code = fields[at]
        status = _STATUSES.get(code[:1])
        if status is None:  # a kind this store never asks for (copies, unmerged): skipped
            at += 3 if code[:1] == "C" else 2
            continue
        if status == "renamed":
            found.append((status, fields[at + 2], fields[at + 1]))
            at += 3
        else:
            found.append((status, fields[at + 1], None))
            at += 2
    return found


def split_raw(output: bytes) -> tuple[bytes, bytes]:
    """``git diff-tree -z --raw --numstat``'s output as ``--name-status`` and ``--numstat``
    would have given it."""
    fields = output.split(b"\0")
    statuses: list[bytes] = []
    at = 0
    while at < len(fields) and fields[at].startswith(b":"):
        code = fields[at].rsplit(b" ", 1)[-1]
        paths = 2 if code[:1] in (b"R", b"C") else 1
        statuses += [code, *fields[at + 1 : at + 1 + paths]]
        at += 1 + paths
    rest = b"\0".join(fields[at:])
    return b"".join(field + b"\0" for field in statuses), rest


def parse_numstat(output: bytes) -> dict[str, tuple[int, int, bool]]:
    """``git diff-tree -r -M -z --numstat``: ``{path: (additions, deletions, binary)}``
    (a renamed file under its new path)."""
    fields = _fields(output)
    counts: dict[str, tuple[int, int, bool]] = {}
    at = 0
    while at < len(fields):
        added, _, rest = fields[at].partition("\t")
        deleted, _, path = rest.partition("\t")
        if path == "":  # a rename: its old and its new path follow
            path = fields[at + 2]
            at += 3
        else:
            at += 1
        binary = added == "-"
        counts[path] = (0 if binary else int(added), 0 if binary else int(deleted), binary)
    return counts


def changes_from(name_status: bytes, numstat: bytes) -> Changes:
    """The changes both listings describe, sorted by path."""
    counts = parse_numstat(numstat)
    files = []
    for status, path, old_path in parse_name_status(name_status):
        additions, deletions, binary = counts.get(path, (0, 0, False))
        files.append(
            FileChange(
                path=_printable(path),
                status=status,
                old_path=None if old_path is None else _printable(old_path),
                additions=additions,
                deletions=deletions,
                binary=binary,
            )
        )
    return Changes(files=tuple(sorted(files, key=lambda change: change.path)))


def _printable(path: str) -> str:
    """A path as JSON can carry it: bytes that are not UTF-8 as U+FFFD."""
    return path.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def changes_from_raw(output: bytes) -> Changes:
    """The changes ``git diff-tree -r -M -z --raw --numstat`` describes, sorted by path."""
    return changes_from(*split_raw(output))
