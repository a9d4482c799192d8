"""``app.process.gitrepo`` against real repositories made with git in tmp_path."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from app.process.gitrepo import (
    GitFailed,
    Repository,
    add_worktree,
    branch_exists,
    branch_problem,
    delete_branch,
    open_repository,
    remove_worktree,
    resolve_commit,
)
from tests.gitrepos import git, two_commits


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return Path(os.path.realpath(tmp_path))


@pytest.fixture
def repo(base: Path) -> Repository:
    """A repository with two commits on ``main`` (the first tagged ``v1``)."""
    path = two_commits(base / "repo")
    return Repository(path=path, git_dir=path / ".git")


def test_a_repository_is_its_work_trees_top_and_its_common_git_dir(repo: Repository) -> None:
    assert open_repository(repo.path) == repo


def test_a_bare_repository_is_its_own_git_dir(repo: Repository, base: Path) -> None:
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(repo.path), str(base / "b.git")], check=True
    )

    assert open_repository(base / "b.git") == Repository(
        path=base / "b.git", git_dir=base / "b.git"
    )


@pytest.mark.parametrize("where", ["plain", "inside"])
def test_a_directory_that_is_not_the_top_of_a_repository_is_refused(
    repo: Repository, base: Path, where: str
) -> None:
    path = base / "plain" if where == "plain" else repo.path / "sub"
    path.mkdir()

    with pytest.raises(GitFailed, match="is not a Git repository"):
        open_repository(path)


def test_refs_resolve_to_their_commit(repo: Repository) -> None:
    head = git(repo.path, "rev-parse", "HEAD")
    first = git(repo.path, "rev-parse", "v1^{commit}")

    assert resolve_commit(repo, "HEAD") == head
    assert resolve_commit(repo, "main") == head
    assert resolve_commit(repo, "v1") == first
    assert resolve_commit(repo, "main~1") == first
    assert resolve_commit(repo, first[:10]) == first


@pytest.mark.parametrize("ref", ["nope", "main~5", "--help", "-h", "HEAD:a.txt", "v1^{tree}"])
def test_a_ref_that_names_no_commit_is_refused_by_name(repo: Repository, ref: str) -> None:
    with pytest.raises(GitFailed, match="does not name a commit"):
        resolve_commit(repo, ref)


def test_branch_names_are_checked_as_git_does(repo: Repository) -> None:
    assert branch_problem(repo, "agent/ses_1") is None
    assert branch_problem(repo, "feature-x") is None
    for bad in ("a..b", "ends.lock", "-dash", "@{-1}", "HEAD", "with space", "a/", "x~1"):
        assert branch_problem(repo, bad) is not None, bad


def test_a_worktree_is_made_on_a_new_branch_at_the_commit_and_removed_keeping_it(
    repo: Repository, base: Path
) -> None:
    first = resolve_commit(repo, "v1")
    path = base / "trees" / "ses_1"

    add_worktree(repo, path=path, branch="agent/ses_1", commit=first)

    assert (path / "a.txt").read_text() == "one\n"
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == "agent/ses_1"
    assert branch_exists(repo, "agent/ses_1")
    assert (
        git(repo.path, "rev-parse", "HEAD") != first
    )  # the repository's own checkout is untouched
    (path / "new.txt").write_text("uncommitted\n")

    remove_worktree(repo, path)

    assert not path.exists()
    assert branch_exists(repo, "agent/ses_1")
    assert str(path) not in git(repo.path, "worktree", "list")


def test_an_existing_branch_is_not_taken_over(repo: Repository, base: Path) -> None:
    with pytest.raises(GitFailed, match="already exists"):
        add_worktree(repo, path=base / "t", branch="main", commit=resolve_commit(repo, "v1"))

    assert not (base / "t").exists()
    assert git(repo.path, "rev-parse", "main") == resolve_commit(repo, "HEAD")


def test_a_worktree_whose_git_file_was_changed_is_still_removed_and_pruned(
    repo: Repository, base: Path
) -> None:
    path = base / "trees" / "ses_2"
    add_worktree(repo, path=path, branch="agent/ses_2", commit=resolve_commit(repo, "HEAD"))
    (path / ".git").write_text(f"gitdir: {base / 'elsewhere'}\n")

    remove_worktree(repo, path)

    assert not path.exists()
    assert "ses_2" not in git(repo.path, "worktree", "list")
    assert not (repo.git_dir / "worktrees" / "ses_2").exists()


def test_removing_a_worktree_that_is_gone_is_harmless(repo: Repository, base: Path) -> None:
    remove_worktree(repo, base / "trees" / "never")

    assert git(repo.path, "worktree", "list").count("\n") == 0


def test_a_branch_made_for_a_session_can_be_taken_back(repo: Repository, base: Path) -> None:
    path = base / "trees" / "ses_3"
    add_worktree(repo, path=path, branch="agent/ses_3", commit=resolve_commit(repo, "HEAD"))
    remove_worktree(repo, path)

    delete_branch(repo, "agent/ses_3")

    assert not branch_exists(repo, "agent/ses_3")


def test_the_repositorys_hooks_and_fsmonitor_never_run(repo: Repository, base: Path) -> None:
    marker = base / "ran"
    hook = repo.git_dir / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\necho hook >> {marker}\n")
    hook.chmod(0o755)
    monitor = base / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\necho monitor >> {marker}\n")
    monitor.chmod(0o755)
    git(repo.path, "config", "core.fsmonitor", str(monitor))
    path = base / "trees" / "ses_4"

    add_worktree(repo, path=path, branch="agent/ses_4", commit=resolve_commit(repo, "HEAD"))
    remove_worktree(repo, path)

    assert not marker.exists()
