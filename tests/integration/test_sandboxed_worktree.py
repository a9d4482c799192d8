"""A session's Git worktree inside a real bubblewrap sandbox: the worktrees root lies in the
gateway's data directory (the default), which every sandbox covers, yet the session sees and
commits in its own worktree, and nothing else of the data directory or the other worktrees."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from app.process.childspec import ProcessSpec, child_environment
from app.process.gitrepo import open_repository, resolve_commit
from app.process.runner import ProcessRunner
from app.providers.sandboxing import Sandbox, SandboxStatus, bwrap_problem, hidden_paths, inside_uid
from app.runtime.worktrees import Worktree, make_worktree
from app.settings import Settings
from tests.integration.test_sandbox_runner import output

SH = "/bin/sh"


@pytest.fixture(scope="module")
def bwrap() -> str:
    found = shutil.which("bwrap")
    assert found is not None, "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    problem = bwrap_problem(found, inside_uid())
    assert problem is None, problem
    return found


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A gateway whose data directory (and so its worktrees root) is ``data``, with a
    repository ``roots/repo`` that has one commit and an identity of its own."""
    base = Path(os.path.realpath(tmp_path))
    repo = base / "roots" / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for key, value in (("user.name", "Agent"), ("user.email", "agent@example.invalid")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    (repo / "README").write_text("hello\n")
    subprocess.run(["git", "-C", str(repo), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "start"], check=True)
    (base / "data").mkdir()
    (base / "data" / "gateway.db").write_text("SQLite format 3\n")
    return Settings(
        storage={"data_dir": base / "data"},
        workspaces={"roots": [base / "roots"]},
    )


def subjects(repository: Path, branch: str) -> list[str]:
    """The subjects of the commits on ``branch``, newest first."""
    log = subprocess.run(
        ["git", "-C", str(repository), "log", "--format=%s", branch],
        capture_output=True,
        text=True,
        check=True,
    )
    return log.stdout.split()


async def worktree_of(settings: Settings, session_id: str) -> Worktree:
    repository = open_repository(settings.workspaces.roots[0] / "repo")
    return await make_worktree(
        settings,
        session_id=session_id,
        repository=repository,
        commit=resolve_commit(repository, "HEAD"),
        branch=f"agent/{session_id}",
    )


async def run_in(
    bwrap: str,
    settings: Settings,
    tree: Worktree,
    session_id: str,
    script: str,
    read_write: tuple[Path, ...] = (),
) -> list[str]:
    box = Sandbox(
        status=SandboxStatus(mode="bwrap", reason="test"),
        bwrap=bwrap,
        homes_dir=settings.homes_dir,
        hidden=hidden_paths(settings),
        read_write=read_write,
    )
    env = child_environment(os.environ, passthrough=(), overlay={})
    confinement, inside = box.confine(
        session_id=session_id,
        workspace=tree.path,
        executable=SH,
        env=env,
        git_dir=tree.repository.git_dir,
    )
    runner = ProcessRunner()
    try:
        process = await runner.spawn(
            ProcessSpec(
                argv=(SH, "-c", script),
                cwd=tree.path,
                env=inside,
                confine_to=(settings.worktrees_root,),
                sandbox=confinement,
            )
        )
        return await output(process)
    finally:
        await runner.aclose(grace_s=0.5)


@pytest.mark.parametrize("shown_above", [False, True], ids=["alone", "under-a-shared-path"])
async def test_the_agent_works_and_commits_in_its_worktree_and_sees_no_other(
    bwrap: str, settings: Settings, shown_above: bool
) -> None:
    """``under-a-shared-path``: the operator shares a directory above the data directory
    (``sandbox.read_write``), so the data directory is covered, and the worktree with it but
    for the session's own bind after the covers."""
    assert settings.worktrees_root.is_relative_to(settings.storage.data_dir)  # the default
    mine, theirs = await worktree_of(settings, "ses_a"), await worktree_of(settings, "ses_b")
    data, git_dir = settings.storage.data_dir, mine.repository.git_dir
    script = (
        "pwd; cat README; echo made > mine.txt; git add mine.txt; git commit -qm mine && "
        f"echo committed; ls -A {settings.worktrees_root}; "
        f"cat {data}/gateway.db 2>/dev/null || echo db-hidden; "
        f"(echo '[core]' >> {git_dir}/config) 2>/dev/null && echo config-written "
        "|| echo config-read-only; "
        f"touch {git_dir}/hooks/pre-commit 2>/dev/null && echo hook-written "
        "|| echo hooks-read-only"
    )

    shared = (settings.storage.data_dir.parent,) if shown_above else ()

    seen = await run_in(bwrap, settings, mine, "ses_a", script, read_write=shared)

    assert seen == [
        str(mine.path),
        "hello",
        "committed",
        "ses_a",  # the other session's worktree is under the cover
        "db-hidden",
        "config-read-only",
        "hooks-read-only",
    ]
    assert subjects(mine.repository.path, "agent/ses_a") == ["mine", "start"]
    assert not (theirs.path / "mine.txt").exists()
    assert not (mine.repository.path / "mine.txt").exists()
