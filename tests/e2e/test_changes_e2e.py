"""What a real agent's approved tool changed, as the gateway records it: the turn's
``changes``, its files and line counts, a patch that ``git apply`` reproduces on the base, and
a revert that gives back the exact bytes (Claude Code and Codex, against the stub)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli_harness import create_session, run_turn
from tests.e2e.conftest import GatewayFactory
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

# One shell command, so every agent runs it as one approved tool call: an edit in place, a
# new file, a deletion and a binary rewrite.
EDIT = (
    "sed -i s/two/TWO/ app.py && printf 'a\\nb\\nc\\n' > new.txt && rm gone.txt "
    "&& printf 'x' > data.bin"
)


def files_of(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mode & 0o777)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def git_apply(patch: bytes, base: Path) -> None:
    subprocess.run(
        ["git", "apply", "--binary", "-"],
        cwd=base,
        input=patch,
        check=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )


@pytest.mark.parametrize("provider", ["claude_code", "codex"])
def test_an_approved_tools_edits_are_the_turns_changes_and_revert_restores_them(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, tmp_path: Path, provider: str
) -> None:
    (workspace / "app.py").write_text("one\ntwo\nthree\n")
    (workspace / "gone.txt").write_text("bye\n")
    (workspace / "data.bin").write_bytes(bytes(range(256)))
    (workspace / "run.sh").write_text("#!/bin/sh\n")
    (workspace / "run.sh").chmod(0o755)
    before = files_of(workspace)
    base = tmp_path / "base"
    shutil.copytree(workspace, base)
    gateway = make_gateway(provider).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)
        events = run_turn(client, sid, f"[[tool:bash {EDIT}]]", decision="allow")

        assert any(e["type"] == "approval.requested" for e in events)
        completed = events[-1]
        assert completed["type"] == "turn.completed", completed
        assert completed["data"]["changes"] == {"files": 4, "additions": 4, "deletions": 2}
        turn_id = completed["turn_id"]
        link = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()["changes"]
        listed = client.get(link).json()
        assert [
            (f["path"], f["status"], f["additions"], f["deletions"], f["binary"])
            for f in listed["files"]
        ] == [
            ("app.py", "modified", 1, 1, False),
            ("data.bin", "modified", 0, 0, True),
            ("gone.txt", "deleted", 0, 1, False),
            ("new.txt", "added", 3, 0, False),
        ]
        patch = client.get(link, params={"format": "patch"})
        assert patch.status_code == 200
        git_apply(patch.content, base)
        assert files_of(base) == files_of(workspace)

        reverted = client.post(f"/v1/sessions/{sid}/revert", json={"to_turn": turn_id})
        assert reverted.status_code == 200, reverted.text
        assert files_of(workspace) == before

        # The agent's next request is told what was undone, before the user's prompt.
        assert run_turn(client, sid, "what now?")[-1]["type"] == "turn.completed"
    asked = [r.conversation_text for r in stub.requests if r.is_message or r.is_openai]
    told = next(text for text in reversed(asked) if "what now?" in text)
    note = told[told.index("[Note from the gateway") :]
    assert "the user reverted the workspace's files to how they were at the start of turn 1" in note
    assert "gone.txt (restored)" in note
    assert note.index("gone.txt") < note.index("what now?")
