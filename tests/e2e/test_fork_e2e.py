"""A three-turn session of a real CLI forked at its first turn, through a real gateway: the
fork is the agent's own (``conversation: native``) and its next turn's model request holds
turn 1's prompt and answer and nothing of turns 2 and 3.

Each case runs on a Git repository, so the fork gets a worktree of its own; Claude Code and
Codex and OpenCode with their sandboxes on (each session has a CLI home of its own, which the
fork's thread is copied into), and Codex once more with it off (one shared app-server forks)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli_harness import run_turn, stored_events
from tests.e2e.conftest import GatewayFactory
from tests.e2e.providers import acp_claude
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

PROMPTS = ("first [[echo]]", "second [[echo]]", "third [[echo]]")


def _repository(workspace: Path) -> Path:
    repo = workspace.parent / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README").write_text("hello\n")
    for args in (
        ("add", "README"),
        ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"),
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return repo


@pytest.mark.parametrize(
    ("provider", "sandbox"),
    [
        ("claude_code", "bwrap"),
        ("codex", "bwrap"),
        ("codex", "none"),
        ("opencode", "bwrap"),
    ],
)
def test_a_fork_at_turn_one_holds_only_turn_one(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, provider: str, sandbox: str
) -> None:
    repo = _repository(workspace)
    gateway = make_gateway(provider, sandbox={"mode": sandbox}).start()
    with gateway.client() as client:
        assert client.get(f"/v1/providers/{provider}").json()["capabilities"]["fork"] is True
        created = client.post("/v1/sessions", json={"repository": str(repo)})
        assert created.status_code == 201, created.text
        parent = created.json()["id"]
        tree = Path(created.json()["workspace"])
        answers = []
        for number, prompt in enumerate(PROMPTS, start=1):
            events = run_turn(client, parent, prompt)
            assert events[-1]["type"] == "turn.completed", events[-1]
            answers.append(events[-1]["data"]["final_text"])
            # Files of the parent's that appear after turn N ended: a fork at turn 1 has none.
            (tree / f"after-turn-{number}.txt").write_text(f"{number}\n")
        assert len(set(answers)) == 3, answers  # each answer tells its own turn apart
        turns = client.get(f"/v1/sessions/{parent}/turns").json()["turns"]
        first = next(t["id"] for t in turns if t["number"] == 1)

        forked = client.post(f"/v1/sessions/{parent}/fork", json={"at_turn": first})
        assert forked.status_code == 201, forked.text
        child = forked.json()
        assert child["forked_from"] == parent
        assert child["forked_at"] == first
        assert child["branch"] == f"agent/{child['id']}"
        assert child["workspace"] != repo
        files = sorted(p.name for p in Path(child["workspace"]).iterdir() if p.name != ".git")
        assert files == ["README"]  # the files as turn 1 ended
        (told,) = [e for e in stored_events(client, child["id"]) if e["type"] == "session.forked"]
        assert told["data"]["conversation"] == "native", gateway.log()[-3000:]
        (on_parent,) = [e for e in stored_events(client, parent) if e["type"] == "session.forked"]
        assert on_parent["data"] == told["data"]

        before = len(stub.requests)
        events = run_turn(client, child["id"], "fourth [[echo]]")
        assert events[-1]["type"] == "turn.completed", events[-1]
        parent_thread = client.get(f"/v1/sessions/{parent}").json()["thread_id"]
        child_thread = client.get(f"/v1/sessions/{child['id']}").json()["thread_id"]
        assert child_thread is not None
        assert child_thread != parent_thread

    asked = [r for r in stub.requests[before:] if r in stub.model_requests()]
    assert asked, "the fork's turn made no model request"
    for request in asked:
        body = json.dumps(request.body)
        texts = request.conversation_text
        assert "first [[echo]]" in texts, texts
        assert "fourth [[echo]]" in texts, texts
        assert "second [[echo]]" not in body
        assert "third [[echo]]" not in body
        assert answers[0] in body, (answers[0], body[-2000:])
        assert answers[1] not in body
        assert answers[2] not in body


def test_an_acp_fork_at_the_latest_turn_is_the_agents_own(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM, tmp_path: Path
) -> None:
    """The Claude ACP adapter, sandboxed: a fork at the latest turn is its ``session/fork``
    (the parent's transcript copied into the fork's home first); one at an earlier turn is
    handed the conversation, since ACP forks a whole thread."""
    repo = _repository(workspace)
    gateway = make_gateway(sandbox={"mode": "bwrap"})
    gateway.config["providers"]["claude_code"] = {"enabled": False}
    gateway.config["providers"]["acp:claude"] = acp_claude(stub, tmp_path / "home")
    gateway.config["selection"]["default"] = "acp:claude"
    gateway.start()
    with gateway.client() as client:
        assert client.get("/v1/providers/acp:claude").json()["capabilities"]["fork"] is True
        created = client.post("/v1/sessions", json={"repository": str(repo)})
        assert created.status_code == 201, created.text
        parent = created.json()["id"]
        answers = []
        for prompt in PROMPTS[:2]:
            events = run_turn(client, parent, prompt)
            assert events[-1]["type"] == "turn.completed", events[-1]
            answers.append(events[-1]["data"]["final_text"])
        turns = client.get(f"/v1/sessions/{parent}/turns").json()["turns"]
        first = next(t["id"] for t in turns if t["number"] == 1)

        earlier = client.post(f"/v1/sessions/{parent}/fork", json={"at_turn": first})
        assert earlier.status_code == 201, earlier.text
        (told,) = [
            e for e in stored_events(client, earlier.json()["id"]) if e["type"] == "session.forked"
        ]
        assert told["data"]["conversation"] == "handoff"

        latest = client.post(f"/v1/sessions/{parent}/fork", json={})
        assert latest.status_code == 201, latest.text
        child = latest.json()["id"]
        (told,) = [e for e in stored_events(client, child) if e["type"] == "session.forked"]
        assert told["data"]["conversation"] == "native", gateway.log()[-3000:]

        before = len(stub.requests)
        events = run_turn(client, child, "fourth [[echo]]")
        assert events[-1]["type"] == "turn.completed", events[-1]
        warnings = [e for e in events if e["type"] == "warning"]
        assert not warnings, warnings  # no context_lost: the fork was made
        parent_thread = client.get(f"/v1/sessions/{parent}").json()["thread_id"]
        child_thread = client.get(f"/v1/sessions/{child}").json()["thread_id"]
        assert child_thread is not None
        assert child_thread != parent_thread

    asked = [r for r in stub.requests[before:] if r in stub.model_requests()]
    conversations = [r for r in asked if "fourth [[echo]]" in r.conversation_text]
    assert conversations, "the fork's turn made no model request"
    for request in conversations:
        body = json.dumps(request.body)
        for prompt, answer in zip(PROMPTS[:2], answers, strict=True):
            assert prompt in request.conversation_text, request.conversation_text
            assert answer in body, (answer, body[-2000:])
