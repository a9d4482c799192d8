"""Git, run by the gateway itself: what a repository is, and a worktree of it made and removed.

Every call runs ``git`` as a child without a shell, with a fixed environment (no system or
user configuration, no prompts, the C locale, discovery stopped at the directory named) and
with hooks and the file-system monitor switched off on the command line: a repository is
input the gateway does not trust, and nothing it configures may run in the gateway's own
process. The calls block (each is bounded by ``timeout_s``); the runtime runs them off the
event loop.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

GIT_TIMEOUT_S = 60.0
"""The longest one git command may take (checking out a large tree included)."""

SAFETY: tuple[str, ...] = (
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "protocol.allow=never"),
)
"""Given to every git the gateway runs: no hook, no file-system monitor, no transport."""

_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def git_env(ceiling: Path) -> dict[str, str]:
    """The whole environment of a gateway git: nothing of the gateway's own, no system or user
    configuration, and no repository discovered above ``ceiling``."""
    return {
        "PATH": _SYSTEM_PATH,
        "HOME": "/nonexistent",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CEILING_DIRECTORIES": str(ceiling),
    }


class GitFailed(Exception):
    """A git command failed (or could not run); ``detail`` is git's own last words."""

    def __init__(self, detail: str, *, returncode: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.returncode = returncode


def run_git(
    args: list[str], *, repository: Path, timeout_s: float = GIT_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run ``git -C repository <args>`` as above; the completed process, whatever its exit
    status. Raises ``GitFailed`` only when git cannot run or takes too long."""
    argv = ["git", *SAFETY, "-C", str(repository), *args]
    try:
        return subprocess.run(  # noqa: S603 - a fixed argv, no shell
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            env=git_env(repository.parent),
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd="/",
        )
    except FileNotFoundError:
        raise GitFailed("git is not installed on the gateway's host") from None
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git {args[0]} took longer than {timeout_s:.0f} s") from None


def _last_words(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    said = lines[-1] if lines else f"exit status {done.returncode}"
    return said.removeprefix("fatal: ").removeprefix("error: ")[:500]


def _checked(args: list[str], repository: Path) -> str:
    done = run_git(args, repository=repository)
    if done.returncode != 0:
        raise GitFailed(_last_words(done), returncode=done.returncode)
    return done.stdout


@dataclass(frozen=True, kw_only=True)
class Repository:
    """A repository the gateway may make worktrees of."""

    path: Path
    """Its work tree's top level (or, bare, its Git directory): real, absolute."""
    git_dir: Path
    """Its common Git directory (objects, refs, and every worktree's own directory)."""


def open_repository(path: Path) -> Repository:
    """The repository at ``path`` (a real, absolute directory), which must be the top of its
    work tree or a bare repository itself, not a directory inside one. Raises ``GitFailed``
    saying what ``path`` is instead."""
    done = run_git(
        ["rev-parse", "--path-format=absolute", "--is-bare-repository", "--git-common-dir"],
        repository=path,
    )
    if done.returncode != 0:
        said = _last_words(done)
        if "not a git repository" in said:
            raise GitFailed(
                f"{path} is not a Git repository (the top of a work tree, or a bare one)"
            )
        raise GitFailed(f"{path}: {said}")
    bare, git_dir = done.stdout.splitlines()[:2]
    common = Path(os.path.realpath(git_dir))
    if bare == "true":
        top = common
    else:
        top = Path(os.path.realpath(_checked(["rev-parse", "--show-toplevel"], path).strip()))
    if top != path:
        raise GitFailed(f"{path} lies inside the repository at {top}; name that one")
    return Repository(path=path, git_dir=common)


def resolve_commit(repository: Repository, ref: str) -> str:
    """The commit ``ref`` names in ``repository`` (full hex). Raises ``GitFailed``."""
    done = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
        repository=repository.path,
    )
    commit = done.stdout.strip()
    if done.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        raise GitFailed(f"{ref!r} does not name a commit in {repository.path}")
    return commit


def branch_problem(repository: Repository, branch: str) -> str | None:
    """What is wrong with ``branch`` as a new branch's name (None: it is a valid name). Only
    the name is checked: whether it exists is ``branch_exists``."""
    if branch.startswith("-") or branch.startswith("@") or branch == "HEAD":
        return f"{branch!r} is not a usable branch name"
    done = run_git(["check-ref-format", f"refs/heads/{branch}"], repository=repository.path)
    if done.returncode != 0:
        return f"{branch!r} is not a valid branch name (git check-ref-format)"
    return None


def branch_exists(repository: Repository, branch: str) -> bool:
    """Whether ``repository`` has a branch named ``branch``."""
    done = run_git(
        ["show-ref", "--verify", "--quiet", f"refs/heads/{branch}"], repository=repository.path
    )
    if done.returncode not in (0, 1):
        raise GitFailed(_last_words(done), returncode=done.returncode)
    return done.returncode == 0


def add_worktree(repository: Repository, *, path: Path, branch: str, commit: str) -> None:
    """Check out ``commit`` at ``path`` (which must not exist) on a new branch ``branch``.
    Raises ``GitFailed``; git takes back what it had made of the worktree (the branch, once
    made, stays: ``delete_branch``)."""
    _checked(
        ["worktree", "add", "--quiet", "--no-track", "-b", branch, "--", str(path), commit],
        repository.path,
    )


def remove_worktree(repository: Repository, path: Path) -> None:
    """Remove the worktree at ``path`` whatever its state (changes in it are lost), then prune
    the repository's record of worktrees that no longer exist. A worktree git no longer knows
    as one (its ``.git`` file changed) is deleted as a directory. Never raises for a worktree
    already gone; logs what it could not do."""
    done = run_git(
        ["worktree", "remove", "--force", "--force", str(path)], repository=repository.path
    )
    if done.returncode != 0 and path.exists():
        log.warning(
            "git could not remove the worktree %s (%s); deleting it", path, _last_words(done)
        )
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)
    pruned = run_git(["worktree", "prune"], repository=repository.path)
    if pruned.returncode != 0:
        log.warning("git worktree prune failed in %s: %s", repository.path, _last_words(pruned))


def delete_branch(repository: Repository, branch: str) -> None:
    """Delete ``branch`` (taking back one the gateway just made); logs a failure."""
    done = run_git(["branch", "-D", "--", branch], repository=repository.path)
    if done.returncode != 0:
        log.warning(
            "could not delete branch %s in %s: %s", branch, repository.path, _last_words(done)
        )
