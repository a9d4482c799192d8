"""The gateway's files are its user's alone: every prompt, output and key is in them.

The data directory is 0700 and the database with its WAL and shared-memory files 0600 (SQLite
gives those the database file's mode, so the database is created 0600 before SQLite opens
it), whatever the umask the gateway was started with; a file or directory made earlier with
a wider mode is narrowed when the gateway next opens it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_directory(path: Path) -> None:
    """Create ``path`` (with its missing parents, each 0700) or narrow it to 0700."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            directory.mkdir(mode=DIRECTORY_MODE)
        _narrow(directory, DIRECTORY_MODE)  # the umask applied to mkdir's mode
    _narrow(path, DIRECTORY_MODE)


def private_database(database: Path) -> None:
    """Create the SQLite file ``database`` empty with mode 0600 when it is missing (SQLite
    takes an empty file as a new database), and narrow it and its companions to 0600."""
    if not database.parent.exists():
        private_directory(database.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    for path in (database, *(Path(f"{database}{suffix}") for suffix in SQLITE_COMPANIONS)):
        if path.exists():
            _narrow(path, FILE_MODE)


def _narrow(path: Path, mode: int) -> None:
    current = path.stat().st_mode
    if stat.S_IMODE(current) == mode:
        return
    if stat.S_ISDIR(current) and current & stat.S_ISVTX:
        # /tmp and the like: shared on purpose; narrowing it would break every other user.
        log.warning(
            "%s is a shared directory (sticky bit): keep the gateway's data elsewhere", path
        )
        return
    try:
        path.chmod(mode)
    except PermissionError:  # not ours: say so, never stop the gateway for it
        log.warning("cannot make %s mode %o: it belongs to another user", path, mode)
