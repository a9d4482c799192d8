"""Two sessions of the real Claude Code on one repository, each in its own Git worktree inside
its bubblewrap sandbox: each writes a file and commits it with an approved Bash call, and each
worktree (and branch) holds only its own work."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli_harness import run_turn
from tests.e2e.conftest import GatewayFactory

pytestmark = pytest.mark.e2e


def git(repository: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repository), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_two_sessions_commit_in_their_own_sandboxed_worktrees(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    repo = workspace.parent / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    # The agent's identity for its commits: its sandbox has a home of its own, no ~/.gitconfig.
    git(repo, "config", "user.name", "Agent")
    git(repo, "config", "user.email", "agent@example.invalid")
    (repo / "README").write_text("hello\n")
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "start")
    gateway = make_gateway().start()
    with gateway.client() as client:
        provider = client.get("/v1/providers/claude_code").json()
        assert provider["sandbox"]["mode"] == "bwrap", provider["sandbox"]
        sessions = {}
        for name in ("one", "two"):
            created = client.post("/v1/sessions", json={"repository": str(repo)})
            assert created.status_code == 201, created.text
            sessions[name] = created.json()
        for name, session in sessions.items():
            command = f"echo {name} > {name}.txt && git add {name}.txt && git commit -qm {name}"
            events = run_turn(client, session["id"], f"[[tool:bash {command}]]", decision="allow")

            assert events[-1]["type"] == "turn.completed", events[-1]
            (done,) = [e for e in events if e["type"] == "tool.completed"]
            assert (done["data"]["status"], done["data"]["exit_code"]) in (
                ("completed", 0),
                ("completed", None),
            ), done

    for name, session in sessions.items():
        tree = Path(session["workspace"])
        assert sorted(p.name for p in tree.iterdir()) == [".git", "README", f"{name}.txt"]
        assert git(repo, "log", "--format=%s", session["branch"]).split() == [name, "start"]
        assert git(tree, "status", "--porcelain") == ""  # committed, from inside the sandbox
    assert sorted(p.name for p in repo.iterdir()) == [".git", "README"]
    assert git(repo, "log", "--format=%s", "main").split() == ["start"]
