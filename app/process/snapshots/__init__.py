"""The gateway's own record of each session's workspace: a Git directory per session, kept
apart from the user's repository (app/process/snapshots/store.py), what it tells about two of
its states (app/process/snapshots/diffs.py), and how Git is run for it
(app/process/snapshots/git.py)."""

from app.process.snapshots.diffs import Changes, FileChange, FileStatus
from app.process.snapshots.git import GitError, GitUnavailable
from app.process.snapshots.store import (
    NOW,
    Size,
    SnapshotStore,
    TooLarge,
    git_problem,
)

__all__ = [
    "NOW",
    "Changes",
    "FileChange",
    "FileStatus",
    "GitError",
    "GitUnavailable",
    "Size",
    "SnapshotStore",
    "TooLarge",
    "git_problem",
]
