"""Git repositories the tests make with the real ``git`` (a fixed identity, so commits need
no user configuration)."""

from __future__ import annotations

import subprocess
from pathlib import Path

IDENTITY = ("-c", "user.name=Test", "-c", "user.email=test@example.invalid")


def git(repository: Path, *args: str) -> str:
    """``git -C repository args…``; its stdout, stripped (fails the test on an error)."""
    done = subprocess.run(
        ["git", *IDENTITY, "-C", str(repository), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def two_commits(path: Path) -> Path:
    """A new repository at ``path``: two commits on ``main`` to ``a.txt`` ("one", then
    "two"), the first tagged ``v1``."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "a.txt").write_text("one\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-qm", "first")
    git(path, "tag", "v1")
    (path / "a.txt").write_text("two\n")
    git(path, "commit", "-qam", "second")
    return path
