"""A Git worktree per session, through the real gateway with the fake ``claude``: made on
creation, refused (with nothing left behind) for bad input, removed on DELETE and by
retention, its branch kept."""

from __future__ import annotations

import dataclasses
import os
import resource
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.store.repository import Store
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import follow, wait_until
from tests.gitrepos import git, two_commits
from tests.integration.callers import assert_problem, session_count
from tests.integration.eventlogs import NOW, SESSION
from tests.integration.rows import session_record


@pytest.fixture
def gateway(make_fake_gateway: FakeGatewayFactory) -> FakeGateway:
    return make_fake_gateway().start()


@pytest.fixture
def repo(gateway: FakeGateway) -> Path:
    """``roots/repo``: two commits on ``main``, the first tagged ``v1``."""
    return two_commits(Path(os.path.realpath(gateway.workspace.parent / "repo")))


def worktrees_root(gateway: FakeGateway) -> Path:
    return Path(os.path.realpath(gateway.data_dir)) / "worktrees"


def repository_state(repo: Path) -> tuple[str, str]:
    """The repository's branches (with their commits) and worktrees."""
    return git(repo, "for-each-ref", "refs/heads"), git(repo, "worktree", "list", "--porcelain")


def turn(client: httpx.Client, session_id: str, prompt: str) -> list[dict[str, Any]]:
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
    assert response.status_code == 202, response.text
    return follow(client, session_id, after=after)


def on_repository(client: httpx.Client, repo: Path, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/sessions", json={"repository": str(repo), **body})
    assert response.status_code == 201, response.text
    session: dict[str, Any] = response.json()
    return session


def test_a_session_on_a_repository_runs_in_a_worktree_of_its_own(
    gateway: FakeGateway, repo: Path
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    with gateway.client() as client:
        session = on_repository(client, repo)
        sid = session["id"]
        tree = worktrees_root(gateway) / sid

        assert (session["repository"], session["branch"], session["base"]) == (
            str(repo),
            f"agent/{sid}",
            head,
        )
        assert session["workspace"] == str(tree)
        assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == f"agent/{sid}"
        created = client.get(f"/v1/sessions/{sid}/events", params={"after": 0}).json()
        (event,) = [e for e in created["events"] if e["type"] == "session.created"]
        assert (event["data"]["repository"], event["data"]["branch"]) == (str(repo), f"agent/{sid}")
        assert event["data"]["workspace"] == str(tree)

        answered = turn(client, sid, "write:note.txt")

        assert answered[-1]["type"] == "turn.completed"
        assert answered[-1]["data"]["final_text"] == str(tree)  # the agent ran in its worktree
        assert (tree / "note.txt").read_text() == "note.txt\n"
        assert not (repo / "note.txt").exists()


def test_two_sessions_on_one_repository_each_have_their_own_worktree(
    gateway: FakeGateway, repo: Path
) -> None:
    with gateway.client() as client:
        first = on_repository(client, repo)
        second = on_repository(client, repo, ref="v1", branch="feature/try-two")
        turn(client, first["id"], "write:first.txt")
        turn(client, second["id"], "write:second.txt")

    one, two = Path(first["workspace"]), Path(second["workspace"])
    assert one != two
    assert sorted(p.name for p in one.iterdir() if p.name != ".git") == ["a.txt", "first.txt"]
    assert sorted(p.name for p in two.iterdir() if p.name != ".git") == ["a.txt", "second.txt"]
    assert (one / "a.txt").read_text() == "two\n"
    assert (two / "a.txt").read_text() == "one\n"  # at v1
    assert second["branch"] == "feature/try-two"
    assert second["base"] == git(repo, "rev-parse", "v1^{commit}")


def test_deleting_the_session_removes_its_worktree_and_keeps_its_branch(
    gateway: FakeGateway, repo: Path
) -> None:
    with gateway.client() as client:
        session = on_repository(client, repo)
        sid, tree = session["id"], Path(session["workspace"])
        (tree / "work.txt").write_text("the agent's work\n")
        git(tree, "add", "work.txt")
        git(tree, "commit", "-qm", "agent work")
        (tree / "loose.txt").write_text("never committed\n")

        deleted = client.delete(f"/v1/sessions/{sid}")

        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["status"] == "closed"
        assert deleted.json()["branch"] == f"agent/{sid}"
        events = client.get(f"/v1/sessions/{sid}/events", params={"after": 0}).json()["events"]
        (closed,) = [e for e in events if e["type"] == "session.closed"]
        assert closed["data"]["kept_branch"] == f"agent/{sid}"
        assert client.delete(f"/v1/sessions/{sid}").status_code == 200  # again: nothing to do
    assert not tree.exists()
    assert str(tree) not in git(repo, "worktree", "list")
    assert git(repo, "log", "--format=%s", f"agent/{sid}").splitlines()[0] == "agent work"


def test_retention_removes_the_worktree_of_a_session_it_forgets(
    gateway: FakeGateway, repo: Path
) -> None:
    with gateway.client() as client:
        session = on_repository(client, repo)
        sid, tree = session["id"], Path(session["workspace"])
        assert turn(client, sid, "hi")[-1]["type"] == "turn.completed"  # binds a thread
    gateway.stop()
    old = (datetime.now(UTC).replace(tzinfo=None) - timedelta(days=31)).isoformat(sep=" ")
    with sqlite3.connect(gateway.data_dir / "gateway.db") as db:
        db.execute("UPDATE session_thread_bindings SET updated_at = ?", (old,))

    result = gateway.command("cleanup")

    assert "1 worktrees (their branches kept)" in result.stdout
    assert not tree.exists()
    assert f"agent/{sid}" in git(repo, "branch", "--list", f"agent/{sid}")


BAD = [
    pytest.param({"repository": "{outside}"}, 422, "repository_rejected", "outside", id="outside"),
    pytest.param({"repository": "{plain}"}, 422, "repository_rejected", "not a Git", id="plain"),
    pytest.param(
        {"repository": "{repo}/sub"}, 422, "repository_rejected", "not a Git", id="inside-repo"
    ),
    pytest.param({"repository": "{repo}/../repo"}, 422, "repository_rejected", "'..'", id="dotdot"),
    pytest.param(
        {"repository": "{repo}", "ref": "no-such-ref"},
        422,
        "repository_rejected",
        "'no-such-ref'",
        id="missing-ref",
    ),
    pytest.param(
        {"repository": "{repo}", "branch": "main"}, 409, "branch_exists", "'main'", id="taken"
    ),
    pytest.param(
        {"repository": "{repo}", "branch": "a..b"},
        422,
        "repository_rejected",
        "not a valid branch",
        id="bad-branch",
    ),
    pytest.param(
        {"repository": "{repo}", "workspace": "{workspace}"},
        422,
        "validation_failed",
        "exactly one",
        id="both",
    ),
    pytest.param({}, 422, "validation_failed", "exactly one", id="neither"),
    pytest.param(
        {"workspace": "{workspace}", "ref": "main"},
        422,
        "validation_failed",
        "only with `repository`",
        id="ref-without-repository",
    ),
    pytest.param(
        {"repository": "{repo}", "provider": "codex"},
        503,
        None,
        None,
        id="no-provider",
    ),
]


@pytest.mark.parametrize(("body", "status", "slug", "says"), BAD)
def test_bad_input_is_a_clear_error_and_leaves_nothing_behind(
    gateway: FakeGateway,
    repo: Path,
    tmp_path: Path,
    body: dict[str, str],
    status: int,
    slug: str | None,
    says: str | None,
) -> None:
    (repo / "sub").mkdir()
    (gateway.workspace.parent / "plain").mkdir()
    (tmp_path / "outside").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path / "outside")], check=True)
    (gateway.data_dir / "worktrees").mkdir()
    places = {
        "outside": tmp_path / "outside",
        "plain": gateway.workspace.parent / "plain",
        "repo": repo,
        "workspace": gateway.workspace,
    }
    filled = {key: value.format(**places) for key, value in body.items()}
    before = repository_state(repo), session_count(gateway)

    with gateway.client() as client:
        answer = assert_problem(client.post("/v1/sessions", json=filled), status, slug)

    if says is not None:
        assert says in answer["detail"], answer
    assert (repository_state(repo), session_count(gateway)) == before
    assert list((gateway.data_dir / "worktrees").iterdir()) == []


def test_no_session_may_name_a_workspace_or_repository_inside_the_worktrees_root(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    trees = tmp_path / "roots" / "trees"
    gateway = make_fake_gateway(workspaces={"worktrees_root": str(trees)}).start()
    repo = gateway.workspace.parent / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    with gateway.client() as client:
        session = on_repository(client, repo)
        tree = Path(session["workspace"])
        assert tree.parent == Path(os.path.realpath(trees))

        for field in ("workspace", "repository"):
            refused = client.post("/v1/sessions", json={field: str(tree)})
            answer = assert_problem(refused, 422)
            assert "gateway's own directory" in answer["detail"]


def test_a_session_that_cannot_be_stored_takes_its_worktree_and_branch_back(
    gateway: FakeGateway, repo: Path
) -> None:
    """The gateway may not grow any file past the database's current size (RLIMIT_FSIZE, as
    on a full disk): the worktree (small files) is made, then storing the session fails."""
    assert gateway.process is not None
    pid = gateway.process.pid
    files = [gateway.data_dir / "gateway.db", gateway.data_dir / "gateway.db-wal"]
    made: list[str] = []
    soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (max(f.stat().st_size for f in files), hard))
    try:
        with gateway.client() as client:

            def refused() -> httpx.Response | None:
                response = client.post("/v1/sessions", json={"repository": str(repo)})
                if response.status_code == 201:  # the log still had room
                    made.append(response.json()["id"])
                return response if response.status_code == 503 else None

            answer = wait_until(refused, what="a 503 while the disk is full")
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))

    assert answer.json()["type"].endswith(":storage_unavailable")
    assert sorted(p.name for p in worktrees_root(gateway).iterdir()) == sorted(made)
    branches = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    assert sorted(branches) == sorted(["main", *(f"agent/{sid}" for sid in made)])


async def test_the_store_keeps_a_sessions_repository_branch_base_and_git_dir(
    store: Store,
) -> None:
    """On SQLite and PostgreSQL alike (the columns of migration 0008)."""
    record = dataclasses.replace(
        session_record("ses_tree", at=NOW),
        workspace="/data/worktrees/ses_tree",
        repository="/work/repo",
        branch="agent/ses_tree",
        base="0" * 40,
        git_dir="/work/repo/.git",
    )
    await store.create_session(record)

    assert await store.get_session("ses_tree") == record
    plain = await store.get_session(SESSION)
    assert plain is not None
    assert (plain.repository, plain.branch, plain.base, plain.git_dir) == (None,) * 4
