"""Forking a session through the real gateway with the fake ``claude``: the new session, its
workspace, the hand-off its first prompt is told (the fake keeps no transcript, so Claude
Code's own fork cannot be made and the gateway hands the conversation over), the refusals,
nothing left behind when a fork fails, and the same fork as a WebSocket ``session.fork``
frame."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import SseReader, is_turn_end
from tests.gitrepos import git
from tests.integration.callers import (
    ALICE,
    KEYS,
    as_key,
    assert_problem,
    new_session,
    session_count,
)
from tests.integration.streams import AUTH, ws_frames, ws_url
from tests.integration.test_worktrees import on_repository, repository_state, turn


@pytest.fixture
def gateway(make_fake_gateway: FakeGatewayFactory) -> FakeGateway:
    return make_fake_gateway().start()


@pytest.fixture
def repo(gateway: FakeGateway) -> Path:
    path = Path(os.path.realpath(gateway.workspace.parent / "repo"))
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-qm", "first")
    return path


def worktrees(gateway: FakeGateway) -> list[str]:
    root = Path(os.path.realpath(gateway.data_dir)) / "worktrees"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def prompts(gateway: FakeGateway) -> list[str]:
    """Every prompt the fake ``claude`` processes received, in order."""
    log = Path(f"{gateway.spawn_log}.prompts")
    return [json.loads(line)["prompt"] for line in log.read_text().splitlines()]


def forked_events(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    page = client.get(f"/v1/sessions/{session_id}/events", params={"after": 0}).json()
    return [e for e in page["events"] if e["type"] == "session.forked"]


def turn_ids(client: httpx.Client, session_id: str) -> list[str]:
    turns = client.get(f"/v1/sessions/{session_id}/turns").json()["turns"]
    return [t["id"] for t in sorted(turns, key=lambda t: t["number"])]


def test_a_fork_copies_the_workspace_and_hands_the_conversation_to_its_first_prompt(
    gateway: FakeGateway,
) -> None:
    with gateway.client() as client:
        created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        parent = created.json()["id"]
        turn(client, parent, "write:one.txt")
        turn(client, parent, "tell me about one")
        first, second = turn_ids(client, parent)

        forked = client.post(f"/v1/sessions/{parent}/fork", json={})

        assert forked.status_code == 201, forked.text
        child = forked.json()
        assert child["forked_from"] == parent
        assert child["forked_at"] == second  # the last completed turn by default
        assert (child["provider"], child["model"], child["approval_mode"]) == (
            created.json()["provider"],
            created.json()["model"],
            created.json()["approval_mode"],
        )
        copy = Path(child["workspace"])
        assert copy.parent.name == "worktrees"
        assert child["repository"] is None
        assert (copy / "one.txt").read_text() == "one.txt\n"
        (told,) = forked_events(client, child["id"])
        (on_parent,) = forked_events(client, parent)
        assert on_parent["data"] == told["data"]
        assert told["data"]["conversation"] == "handoff"
        assert told["data"]["handoff"]["turns"] == 2
        assert (told["data"]["at_turn"], told["data"]["turn_number"]) == (second, 2)

        answered = turn(client, child["id"], "and now two")
        turn(client, child["id"], "and three")

        assert answered[-1]["type"] == "turn.completed"
        assert answered[0]["data"]["prompt"] == "and now two"  # the client's prompt, as sent
        *_, handed, plain = prompts(gateway)
        assert handed.startswith("This session is a fork of another one")
        assert "## Turn 1\nUser: write:one.txt" in handed
        assert "## Turn 2\nUser: tell me about one\nAgent: fake reply" in handed
        assert handed.endswith("## Now\nUser: and now two")
        assert plain == "and three"  # told once
        assert first not in handed

        fork_of_fork = client.post(f"/v1/sessions/{child['id']}/fork", json={})
        assert fork_of_fork.status_code == 201, fork_of_fork.text

        deleted = client.delete(f"/v1/sessions/{child['id']}")
        assert deleted.status_code == 200
        assert not copy.exists()  # the fork's copy goes with it, like a worktree
        assert (gateway.workspace / "one.txt").exists()


def test_a_fork_at_an_earlier_turn_hands_over_only_the_turns_up_to_it(
    gateway: FakeGateway,
) -> None:
    with gateway.client() as client:
        parent = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()
        for prompt in ("alpha", "beta", "gamma"):
            turn(client, parent["id"], prompt)
        first = turn_ids(client, parent["id"])[0]

        child = client.post(f"/v1/sessions/{parent['id']}/fork", json={"at_turn": first}).json()
        turn(client, child["id"], "delta")

    handed = prompts(gateway)[-1]
    assert "User: alpha" in handed
    assert "beta" not in handed
    assert "gamma" not in handed


def test_a_fork_of_a_worktree_session_is_a_worktree_of_its_own_with_the_parents_files(
    gateway: FakeGateway, repo: Path
) -> None:
    with gateway.client() as client:
        parent = on_repository(client, repo)
        turn(client, parent["id"], "write:note.txt")
        turn(client, parent["id"], "run:rm a.txt")  # the agent's edits, not committed
        (Path(parent["workspace"]) / "later.txt").write_text("after the turn\n")

        child = client.post(f"/v1/sessions/{parent['id']}/fork", json={}).json()

    tree = Path(child["workspace"])
    assert child["repository"] == str(repo)
    assert child["branch"] == f"agent/{child['id']}"
    assert child["base"] == parent["base"]
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == child["branch"]
    assert sorted(p.name for p in tree.iterdir()) == [".git", "note.txt"]
    assert git(tree, "status", "--porcelain").splitlines() == ["D a.txt", "?? note.txt"]


def test_fork_refusals_leave_nothing_behind(
    gateway: FakeGateway, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with gateway.client() as client:
        parent = on_repository(client, repo)
        sid = parent["id"]
        assert_problem(client.post(f"/v1/sessions/{sid}/fork", json={}), 409, "turn_not_forkable")
        turn(client, sid, "fail-auth")
        failed = turn_ids(client, sid)[0]
        refused = client.post(f"/v1/sessions/{sid}/fork", json={"at_turn": failed})
        assert assert_problem(refused, 409, "turn_not_forkable")["turn_status"] == "failed"
        assert_problem(client.post(f"/v1/sessions/{sid}/fork", json={"at_turn": "trn_x"}), 404)
        assert_problem(client.post("/v1/sessions/ses_nope/fork", json={}), 404)
        assert forked_events(client, sid) == []


def test_a_fork_at_turn_1_of_3_has_the_files_of_turn_1(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        parent = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()
        for prompt in ("write:one.txt", "write:two.txt", "run:rm one.txt"):
            turn(client, parent["id"], prompt)
        first = turn_ids(client, parent["id"])[0]
        child = client.post(f"/v1/sessions/{parent['id']}/fork", json={"at_turn": first})

    assert child.status_code == 201, child.text
    copy = Path(child.json()["workspace"])
    assert sorted(p.name for p in copy.iterdir()) == ["one.txt"]
    assert (copy / "one.txt").read_text() == "one.txt\n"


def test_without_snapshots_only_a_fork_at_the_latest_turn_is_made(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    """From the files as they are; a fork at an earlier turn is a 409 with nothing made."""
    off = make_fake_gateway(snapshots={"enabled": False}).start()
    with off.client() as client:
        sid = client.post("/v1/sessions", json={"workspace": str(off.workspace)}).json()["id"]
        turn(client, sid, "write:three.txt")
        turn(client, sid, "fine")
        first = turn_ids(client, sid)[0]
        count, trees = session_count(off), worktrees(off)
        refused = client.post(f"/v1/sessions/{sid}/fork", json={"at_turn": first})
        latest = client.post(f"/v1/sessions/{sid}/fork", json={})

        assert "snapshots are off" in assert_problem(refused, 409, "snapshot_unavailable")["detail"]
        assert latest.status_code == 201, latest.text
        assert (Path(latest.json()["workspace"]) / "three.txt").exists()
        assert (session_count(off), len(worktrees(off))) == (count + 1, len(trees) + 1)


def test_a_fork_that_cannot_copy_the_files_leaves_nothing_behind(
    make_fake_gateway: FakeGatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without snapshots a fork copies the files as they are: one it cannot copy (a socket)
    takes back the worktree and branch made first."""
    gateway = make_fake_gateway(snapshots={"enabled": False}).start()
    repo = Path(os.path.realpath(gateway.workspace.parent / "repo"))
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "first")
    with gateway.client() as client:
        parent = on_repository(client, repo)
        sid = parent["id"]
        turn(client, sid, "fine")
        state, count, trees = repository_state(repo), session_count(gateway), worktrees(gateway)

        # A file the fork cannot copy (a socket) in the parent's worktree: its own worktree and
        # branch, made first, are taken back.
        monkeypatch.chdir(parent["workspace"])
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind("agent.sock")
            refused = client.post(f"/v1/sessions/{sid}/fork", json={})
        assert "could not be copied" in assert_problem(refused, 422, "workspace_rejected")["detail"]
        Path(parent["workspace"], "agent.sock").unlink()

        assert (repository_state(repo), session_count(gateway), worktrees(gateway)) == (
            state,
            count,
            trees,
        )
        assert forked_events(client, sid) == []


def test_a_session_running_a_turn_is_not_forked(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()["id"]
        turn(client, sid, "hello")
        count, trees = session_count(gateway), worktrees(gateway)
        after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
        headers = {"Accept": "text/event-stream", "Last-Event-ID": str(after)}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as stream:
            reader = SseReader(stream)
            started = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "slow"})
            assert started.status_code == 202
            reader.until(lambda e: e["type"] == "message.delta")

            busy = client.post(f"/v1/sessions/{sid}/fork", json={})

            assert_problem(busy, 409, "turn_in_progress")
            client.post(f"/v1/sessions/{sid}/interrupt")
            reader.until(is_turn_end)
        assert (session_count(gateway), worktrees(gateway)) == (count, trees)
        assert client.post(f"/v1/sessions/{sid}/fork", json={}).status_code == 201


def ws_command(ws: ClientConnection, frame: dict[str, Any]) -> list[dict[str, Any]]:
    """Send a command frame; the frames received up to the ``ack`` or ``error`` that answers
    it, that one last."""
    ws.send(json.dumps(frame))
    received = ws_frames(ws, lambda f: f.get("type") in {"ack", "error"})
    assert received[-1]["request"] == frame["type"], received[-1]
    return received


def test_a_session_fork_frame_forks_like_the_rest_route(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        parent = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()
        turn(client, parent["id"], "write:one.txt")
        turn(client, parent["id"], "write:two.txt")
        first, _ = turn_ids(client, parent["id"])
        after = client.get(f"/v1/sessions/{parent['id']}").json()["last_seq"]

        with ws_connect(ws_url(gateway, parent["id"], after=after), additional_headers=AUTH) as ws:
            *events, ack = ws_command(ws, {"type": "session.fork", "at_turn": first})
            # The event and the answer travel apart: either may come first.
            if not any(e["type"] == "session.forked" for e in events):
                events += ws_frames(ws, lambda f: f.get("type") == "session.forked")
        (told,) = [e for e in events if e["type"] == "session.forked"]

        assert ack["type"] == "ack", ack
        child = ack["session"]
        shown = client.get(f"/v1/sessions/{child['id']}").json()
        fields = ("id", "provider", "workspace", "approval_mode", "forked_from", "forked_at")
        assert {k: child[k] for k in fields} == {k: shown[k] for k in fields}
        assert (child["forked_from"], child["forked_at"]) == (parent["id"], first)
        assert told["data"]["child_id"] == child["id"]
        assert told["data"]["turn_number"] == 1
        copy = Path(child["workspace"])
        assert sorted(p.name for p in copy.iterdir()) == ["one.txt"]
        assert forked_events(client, child["id"])[0]["data"] == told["data"]


def test_a_session_fork_frame_is_refused_as_the_rest_route_is(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS, limits={"max_open_sessions_per_key": 2}).start()
    alice_auth = {"Authorization": f"Bearer {ALICE}"}
    with as_key(gateway, ALICE) as alice:
        sid = new_session(alice, gateway.workspace)
        turn(alice, sid, "fail-auth")
        failed = turn_ids(alice, sid)[0]
        rest: list[dict[str, Any]] = []
        answers: list[dict[str, Any]] = []
        with ws_connect(ws_url(gateway, sid), additional_headers=alice_auth) as ws:
            for at_turn in (failed, "trn_x"):
                rest.append(
                    alice.post(f"/v1/sessions/{sid}/fork", json={"at_turn": at_turn}).json()
                )
                answers.append(ws_command(ws, {"type": "session.fork", "at_turn": at_turn})[-1])
            ws_command(ws, {"type": "turn.start", "prompt": "slow"})
            ws_frames(ws, lambda f: f.get("type") == "message.delta")  # the turn runs
            rest.append(alice.post(f"/v1/sessions/{sid}/fork", json={}).json())
            answers.append(ws_command(ws, {"type": "session.fork"})[-1])
            ws_command(ws, {"type": "turn.interrupt"})
            ws_frames(ws, lambda f: "seq" in f and is_turn_end(f))
            turn(alice, sid, "hello")
            new_session(alice, gateway.workspace)  # the second of two open sessions
            rest.append(alice.post(f"/v1/sessions/{sid}/fork", json={}).json())
            answers.append(ws_command(ws, {"type": "session.fork"})[-1])

        assert [a["type"] for a in answers] == ["error"] * 4
        problems = [a["problem"] for a in answers]
        assert [p["status"] for p in problems] == [409, 404, 409, 429]
        assert [(p["status"], p["type"]) for p in problems] == [
            (p["status"], p["type"]) for p in rest
        ]
        assert problems[0]["type"].endswith(":turn_not_forkable")
        assert problems[2]["type"].endswith(":turn_in_progress")
        assert problems[3]["limit"] == rest[3]["limit"] == "max_open_sessions_per_key"
        assert session_count(gateway) == 2
        assert forked_events(alice, sid) == []
