"""What each turn changed in its workspace, and reverting it, through a real gateway whose
``claude`` is the fake (its ``run:<command>`` prompt changes files as an approved tool would)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect as ws_connect

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import TOKEN, follow, is_turn_end
from tests.integration.streams import last_seq, ws_frames

PROBLEM = "application/problem+json"


def new_session(client: httpx.Client, workspace: Path) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(workspace)})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def start(client: httpx.Client, session_id: str, prompt: str) -> tuple[str, int]:
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
    assert response.status_code == 202, response.text
    return response.json()["id"], after


def turn(client: httpx.Client, session_id: str, prompt: str) -> tuple[str, list[dict[str, Any]]]:
    turn_id, after = start(client, session_id, prompt)
    return turn_id, follow(client, session_id, after=after)


def files_of(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mode & 0o777)
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(directory).parts
    }


def git(cwd: Path, *args: str, data: bytes | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=data, capture_output=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def repository(workspace: Path) -> Path:
    """The fake gateway's workspace as a Git repository with some work in it."""
    git(workspace, "init", "-q")
    (workspace / "app.py").write_text("one\ntwo\nthree\n")
    (workspace / "notes.md").write_text("keep me\n")
    (workspace / "logo.bin").write_bytes(bytes(range(256)))
    (workspace / ".gitignore").write_text("*.log\n")
    (workspace / "build.log").write_text("ignored\n")
    git(workspace, "add", "app.py")
    return workspace


EDIT = (
    "run:printf 'one\\nTWO\\nthree\\nfour\\n' > app.py && printf 'a\\nb\\n' > new.txt "
    "&& rm notes.md && printf '\\001\\002' > logo.bin && echo more >> build.log"
)


def test_a_turn_reports_its_changes_and_its_patch_applies_on_the_base(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    workspace = repository(fake_gateway.workspace)
    base = tmp_path / "base"
    shutil.copytree(workspace, base, ignore=shutil.ignore_patterns(".git", "*.log"))
    user_index = (workspace / ".git" / "index").read_bytes()
    with fake_gateway.client() as client:
        sid = new_session(client, workspace)
        turn_id, events = turn(client, sid, EDIT)

        completed = events[-1]
        assert completed["type"] == "turn.completed"
        assert completed["data"]["changes"] == {"files": 4, "additions": 4, "deletions": 2}
        link = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()["changes"]
        assert link == f"/v1/sessions/{sid}/changes?from={turn_id}&to={turn_id}"
        listed = client.get(link)
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert (body["from"], body["to"]) == (turn_id, turn_id)
        assert [(f["path"], f["status"], f["additions"], f["deletions"], f["binary"])
                for f in body["files"]] == [
            ("app.py", "modified", 2, 1, False),
            ("logo.bin", "modified", 0, 0, True),
            ("new.txt", "added", 2, 0, False),
            ("notes.md", "deleted", 0, 1, False),
        ]  # fmt: skip
        assert "+TWO" in body["diff"]
        assert "Binary files" in body["diff"]
        assert client.get(f"/v1/sessions/{sid}/changes").json()["files"] == body["files"]
        patch = client.get(link, params={"format": "patch"})
        assert patch.headers["content-type"].startswith("text/x-diff")

    git(base, "apply", "--binary", "-", data=patch.content)
    expected = files_of(workspace)
    expected.pop("build.log")
    assert files_of(base) == expected
    assert (workspace / ".git" / "index").read_bytes() == user_index


def test_revert_restores_the_exact_files_and_the_next_prompt_is_told(
    fake_gateway: FakeGateway,
) -> None:
    workspace = repository(fake_gateway.workspace)
    before = files_of(workspace)
    with fake_gateway.client() as client:
        sid = new_session(client, workspace)
        first, _ = turn(client, sid, EDIT)
        second, _ = turn(client, sid, "run:chmod +x new.txt && mkdir -p d && echo x > d/y")
        after_first = {**before}
        response = client.post(f"/v1/sessions/{sid}/revert", json={"to_turn": first})
        assert response.status_code == 200, response.text
        reverted = response.json()
        assert reverted["turn_number"] == 1
        assert {(f["path"], f["status"]) for f in reverted["files"]} == {
            ("app.py", "modified"),
            ("d/y", "deleted"),
            ("logo.bin", "modified"),
            ("new.txt", "deleted"),
            ("notes.md", "added"),
        }
        after_first["build.log"] = (b"ignored\nmore\n", 0o644)
        assert files_of(workspace) == after_first
        assert not (workspace / "d").exists()
        page = client.get(f"/v1/sessions/{sid}/events", params={"after": 0}).json()
        told = [e for e in page["events"] if e["type"] == "session.reverted"]
        assert told[0]["data"]["to_turn"] == first
        assert told[0]["data"]["changes"]["files"] == 5

        _, events = turn(client, sid, "hello")
        assert events[-1]["type"] == "turn.completed"
        assert (
            client.get(f"/v1/sessions/{sid}/changes?from={second}&to={second}").status_code == 200
        )

    logged = Path(f"{fake_gateway.spawn_log}.prompts").read_text().splitlines()
    prompts = [json.loads(line)["prompt"] for line in logged]
    assert prompts[-1].startswith("[Note from the gateway: the user reverted the workspace")
    assert "start of turn 1" in prompts[-1]
    assert "notes.md (restored)" in prompts[-1]
    assert prompts[-1].endswith("\n\nhello")


def test_revert_while_a_turn_runs_is_refused(fake_gateway: FakeGateway) -> None:
    with fake_gateway.client() as client:
        sid = new_session(client, fake_gateway.workspace)
        first, _ = turn(client, sid, "run:echo a > a.txt")
        running, after = start(client, sid, "slow")
        # Once it streams, an interrupt reaches the fake's running turn.
        follow(client, sid, lambda e: e["type"] == "message.delta", after=after)
        refused = client.post(f"/v1/sessions/{sid}/revert", json={"to_turn": first})
        assert refused.status_code == 409
        assert refused.headers["content-type"] == PROBLEM
        assert refused.json()["type"].endswith(":turn_in_progress")
        assert refused.json()["turn_id"] == running
        running_to = client.get(f"/v1/sessions/{sid}/changes", params={"to": running})
        assert running_to.status_code == 409
        assert "to=now" in running_to.json()["detail"]
        assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
        follow(client, sid, is_turn_end, after=after)
        assert (fake_gateway.workspace / "a.txt").read_text() == "a\n"


def test_bad_input_is_a_clear_problem(fake_gateway: FakeGateway) -> None:
    with fake_gateway.client() as client:
        sid = new_session(client, fake_gateway.workspace)
        nothing_yet = client.get(f"/v1/sessions/{sid}/changes")
        assert nothing_yet.status_code == 409
        assert nothing_yet.json()["type"].endswith(":snapshot_unavailable")
        first, _ = turn(client, sid, "run:echo 1 > one")
        second, _ = turn(client, sid, "run:echo 2 > two")
        url = f"/v1/sessions/{sid}/changes"
        for params, status, says in [
            ({"from": "trn_nope"}, 404, "from: session"),
            ({"to": "trn_nope"}, 404, "to: session"),
            ({"from": second, "to": first}, 422, "is after to"),
            ({"form": "start"}, 422, "unknown query parameter"),
            ({"format": "zip"}, 422, "format"),
        ]:
            refused = client.get(url, params=params)
            assert refused.status_code == status, (params, refused.text)
            assert refused.headers["content-type"] == PROBLEM
            assert says in refused.text, (params, refused.text)
        for body, status in (
            ({"to_turn": "trn_nope"}, 404),
            ({"to_turn": first, "extra": 1}, 422),
            ({}, 422),
        ):
            refused = client.post(f"/v1/sessions/{sid}/revert", json=body)
            assert refused.status_code == status, (body, refused.text)
        assert client.get("/v1/sessions/ses_nope/changes").status_code == 404
        assert (
            client.post("/v1/sessions/ses_nope/revert", json={"to_turn": first}).status_code == 404
        )
        whole = client.get(url, params={"from": first, "to": second}).json()
        assert [f["path"] for f in whole["files"]] == ["one", "two"]
        assert client.delete(f"/v1/sessions/{sid}").status_code == 200
        closed = client.post(f"/v1/sessions/{sid}/revert", json={"to_turn": first})
        assert closed.status_code == 409
        assert closed.json()["type"].endswith(":session_closed")


def test_a_workspace_over_the_cap_is_refused_and_one_growing_past_it_warns(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    gateway = make_fake_gateway(snapshots={"max_files": 5}).start()
    big = gateway.workspace.parent / "big"
    big.mkdir()
    for i in range(8):
        (big / f"f{i}").write_text("x")
    (big / ".gitignore").write_text("ignored/\n")
    with gateway.client() as client:
        refused = client.post("/v1/sessions", json={"workspace": str(big)})
        assert refused.status_code == 422
        problem = refused.json()
        assert problem["type"].endswith(":workspace_too_large")
        assert "snapshots.max_files" in problem["detail"]
        assert problem["max_files"] == 5
        assert client.get("/v1/sessions").json()["sessions"] == []
        for i in range(8, 20):  # what .gitignore ignores does not count
            (big / "ignored").mkdir(exist_ok=True)
            (big / "ignored" / f"f{i}").write_text("x")
        for i in range(4):  # 4 files and .gitignore: at the cap, not over it
            (big / f"f{i}").unlink()

        sid = new_session(client, big)
        _, events = turn(client, sid, "run:touch g1 g2 g3")
        assert events[-1]["type"] == "turn.completed"
        assert events[-1]["data"]["changes"] is None
        warned = [e["data"] for e in events if e["type"] == "warning"]
        assert warned[0]["code"] == "snapshot_skipped"
        assert "snapshots.max_files" in warned[0]["message"]
        _, again = turn(client, sid, "hi")
        assert again[-1]["type"] == "turn.completed"
        assert "start" in next(e for e in again if e["type"] == "warning")["data"]["message"]


def test_with_snapshots_off_nothing_is_recorded(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(snapshots={"enabled": False}).start()
    with gateway.client() as client:
        sid = new_session(client, gateway.workspace)
        turn_id, events = turn(client, sid, "run:echo a > a")
        assert events[-1]["data"]["changes"] is None
        refused = client.get(f"/v1/sessions/{sid}/changes?from={turn_id}&to={turn_id}")
        assert refused.status_code == 409
        assert "snapshots.enabled = false" in refused.json()["detail"]
    assert not (gateway.data_dir / "snapshots").exists()


def all_seen(types: set[str]) -> Callable[[dict[str, Any]], bool]:
    """A stop for ``ws_frames``: once a frame of each of ``types`` has come."""
    seen: set[str] = set()

    def stop(frame: dict[str, Any]) -> bool:
        seen.add(frame.get("type", ""))
        return types <= seen

    return stop


def test_a_websocket_session_revert_frame_reverts_and_is_acknowledged(
    fake_gateway: FakeGateway,
) -> None:
    """The WebSocket's ``session.revert`` is the same command as ``POST …/revert``: the files
    come back, the ack carries what changed, and the ``session.reverted`` event follows on
    the same socket; refusals come back as ``error`` frames naming the request."""
    workspace = fake_gateway.workspace
    (workspace / "kept.txt").write_text("as it was\n")
    with fake_gateway.client() as client:
        sid = new_session(client, workspace)
        first, _ = turn(client, sid, "run:echo changed > kept.txt && echo new > new.txt")
        url = f"{fake_gateway.ws_url}/v1/sessions/{sid}/ws?after={last_seq(client, sid)}"
        with ws_connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            ws.send(json.dumps({"type": "session.revert", "to_turn": "trn_nope"}))
            refused = ws_frames(ws, lambda f: f.get("type") == "error")[-1]
            ws.send(json.dumps({"type": "session.revert", "to_turn": first}))
            # The event and the ack, in either order: the event is sent as it is stored.
            frames = ws_frames(ws, all_seen({"ack", "session.reverted"}))

    assert refused["request"] == "session.revert"
    assert refused["problem"]["status"] == 404
    assert refused["problem"]["field"] == "to_turn"
    ack = next(f for f in frames if f.get("type") == "ack")
    assert ack["request"] == "session.revert"
    assert ack["revert"]["to_turn"] == first
    assert {(f["path"], f["status"]) for f in ack["revert"]["files"]} == {
        ("kept.txt", "modified"),
        ("new.txt", "deleted"),
    }
    event = next(f for f in frames if f.get("type") == "session.reverted")
    assert event["data"]["to_turn"] == first
    assert event["data"]["changes"]["files"] == 2
    assert (workspace / "kept.txt").read_text() == "as it was\n"
    assert not (workspace / "new.txt").exists()


def test_with_snapshots_on_a_missing_or_old_git_stops_the_start_and_fails_doctor(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    old_git = tmp_path / "old-git"
    old_git.write_text("#!/bin/sh\necho 'git version 2.25.1'\n")
    old_git.chmod(0o755)
    for git_path, said in ((tmp_path / "no-git", "is not installed"), (old_git, "older than 2.32")):
        gateway = make_fake_gateway(snapshots={"git": str(git_path)})
        gateway.data_dir.mkdir(parents=True, exist_ok=True)

        refused = gateway.command("serve", check=False)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "snapshots.enabled is on but" in refused.stderr
        assert said in refused.stderr
        assert "snapshots.enabled = false" in refused.stderr
        assert "Traceback" not in refused.stderr

        doctor = gateway.command("doctor", check=False)
        assert doctor.returncode == 1, doctor.stdout + doctor.stderr
        line = next(
            x for x in doctor.stdout.splitlines() if x.split()[:2] == ["gateway", "snapshots"]
        )
        assert "FAIL" in line
        assert said in line

        gateway.config["snapshots"]["enabled"] = False  # off: that Git is never needed
        started = gateway.start()
        with started.client() as client:
            assert client.get("/readyz").status_code == 200
        started.stop()
