"""The gateway's own record of each session's workspace: a Git directory per session, kept
apart from the user's repository (app/process/snapshots/store.py), what it tells about two of
its states (app/process/snapshots/diffs.py), how a workspace is staged in it
under its size cap (app/process/snapshots/staging.py), and how Git is run for it
(app/process/snapshots/git.py)."""

from app.process.snapshots.diffs import Changes, FileChange, FileStatus
from app.process.snapshots.git import GitError, GitUnavailable
from app.process.snapshots.staging import Size, TooLarge
from app.process.snapshots.store import NOW, SnapshotStore, git_problem

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
