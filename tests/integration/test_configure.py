"""Changing a session's model, approval mode or provider between its turns, through a real
gateway with the fake CLIs: the next turn runs with the new settings in the same thread, the
provider changes only before the first turn, and every refusal leaves the session as it was.
The same change as a WebSocket ``session.configure`` frame."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect as ws_connect

from app.providers.claude.argv import permission_mode
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_gateway_at, fake_server_in
from tests.gateway import TOKEN, follow, wait_until
from tests.integration.callers import assert_problem, create
from tests.integration.streams import last_seq, stored, ws_frames

EVERY_MODE = {"allowed_approval_modes": ["ask", "auto_edits", "allow_all", "read_only"]}
KEPT = ("provider", "model", "approval_mode", "selection", "updated_at", "last_seq")
"""What a refused change leaves as it was."""


def configure(client: httpx.Client, session_id: str, **body: Any) -> httpx.Response:
    return client.patch(f"/v1/sessions/{session_id}", json=body)


def turn(client: httpx.Client, session_id: str, prompt: str) -> list[dict[str, Any]]:
    """Run a turn to its end; its events."""
    after = last_seq(client, session_id)
    started = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
    assert started.status_code == 202, started.text
    events = follow(client, session_id, after=after)
    assert events[-1]["type"] == "turn.completed", events[-1]
    return events


def configured(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    return [e for e in stored(client, session_id) if e["type"] == "session.configured"]


def kept(client: httpx.Client, session_id: str) -> dict[str, Any]:
    session = client.get(f"/v1/sessions/{session_id}").json()
    return {name: session[name] for name in KEPT}


def all_seen(types: set[str]) -> Callable[[dict[str, Any]], bool]:
    """A ``ws_frames`` stop: true once a frame of each of ``types`` has come, in any order."""
    seen: set[str] = set()

    def stop(frame: dict[str, Any]) -> bool:
        seen.add(frame.get("type", ""))
        return types <= seen

    return stop


def with_codex(make_fake_gateway: FakeGatewayFactory, base: Path, **overrides: Any) -> FakeGateway:
    """The fake Claude Code (the default) and the fake Codex, each enabled."""
    codex = overrides.pop("codex_executable", None) or fake_server_in(base / "bin", "codex")
    return make_fake_gateway(
        codex={
            "enabled": True,
            "executable": str(codex),
            "env": {"FAKE_CODEX_LOG": str(base / "codex.log")},
        },
        **overrides,
    ).start()


def codex_requests(base: Path, method: str) -> list[dict[str, Any]]:
    """The params of every ``method`` request the fake Codex read."""
    found = []
    for line in (base / "codex.log").read_text().splitlines():
        message = json.loads(line).get("in") or {}
        if message.get("method") == method:
            found.append(message["params"])
    return found


def test_a_new_model_and_approval_mode_reach_the_next_turn_in_the_same_thread(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid = create(client, fake_gateway)
        turn(client, sid, "hello")
        before = client.get(f"/v1/sessions/{sid}").json()
        assert before["process"] is not None  # the CLI stays up for the next turn

        changed = configure(client, sid, model="opus", approval_mode="auto_edits")

        assert changed.status_code == 200, changed.text
        session = changed.json()
        assert (session["model"], session["approval_mode"]) == ("opus", "auto_edits")
        assert session["provider"] == "claude_code"
        assert session["thread_id"] == before["thread_id"]
        assert session["process"] is None  # the idle CLI was closed
        (event,) = configured(client, sid)
        assert event["data"] == {
            "model": "opus",
            "approval_mode": "auto_edits",
            "provider": "claude_code",
            "by": "admin",
        }
        assert event["provider"] == "claude_code"
        assert session["last_seq"] == event["seq"]

        turn(client, sid, "again")

    first, second = fake_gateway.spawns()
    assert "--model" not in first["argv"]
    assert first["argv"][first["argv"].index("--permission-mode") + 1] == permission_mode("ask")
    argv = second["argv"]
    assert argv[argv.index("--model") + 1] == "opus"
    assert argv[argv.index("--permission-mode") + 1] == permission_mode("auto_edits")
    assert f"--resume={before['thread_id']}" in argv


def test_a_change_to_what_the_session_has_already_writes_nothing(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid = create(client, fake_gateway)
        turn(client, sid, "hello")
        before = client.get(f"/v1/sessions/{sid}").json()

        same = configure(client, sid, approval_mode=before["approval_mode"], provider="claude_code")

        assert same.status_code == 200, same.text
        assert {name: same.json()[name] for name in KEPT} == kept(client, sid)
        assert kept(client, sid) == {name: before[name] for name in KEPT}
        assert same.json()["process"] == before["process"]  # the CLI was left alone
        assert configured(client, sid) == []


def test_the_provider_changes_before_the_first_turn_and_is_fixed_after_it(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    gateway = with_codex(make_fake_gateway, tmp_path)
    with gateway.client() as client:
        created = client.post(
            "/v1/sessions", json={"workspace": str(gateway.workspace), "model": "opus"}
        )
        sid = created.json()["id"]
        assert created.json()["provider"] == "claude_code"

        moved = configure(client, sid, provider="codex")

        assert moved.status_code == 200, moved.text
        # Without a model the session takes the one configured for the provider (none).
        assert (moved.json()["provider"], moved.json()["model"]) == ("codex", None)
        assert moved.json()["selection"]["reason"] == "explicit"
        assert configure(client, sid, model="gpt-test").status_code == 200

        events = turn(client, sid, "hello")

        assert {e["provider"] for e in events} == {"codex"}
        (started,) = codex_requests(tmp_path, "thread/start")
        assert started["model"] == "gpt-test"
        assert gateway.spawns() == []  # Claude Code never ran for it
        assert [e["data"]["provider"] for e in configured(client, sid)] == ["codex", "codex"]

        before = kept(client, sid)
        fixed = configure(client, sid, provider="claude_code")

        body = assert_problem(fixed, 409, "provider_fixed")
        assert "has run a turn" in body["detail"]
        assert kept(client, sid) == before
        assert configure(client, sid, provider="codex").status_code == 200  # no change


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGateway]:
    """One gateway for the refusals (each test makes a session of its own on it)."""
    gateway = fake_gateway_at(tmp_path_factory.mktemp("refusals")).start()
    yield gateway
    gateway.stop()


@pytest.mark.parametrize(
    ("body", "status", "slug"),
    [
        ({}, 422, "validation_failed"),
        ({"model": None}, 422, "validation_failed"),
        ({"approval_mode": "ask", "colour": "red"}, 422, "validation_failed"),
        ({"model": "--dangerous"}, 422, "validation_failed"),
        ({"provider": "acp:nonesuch"}, 422, "invalid_request"),  # not configured here
        ({"approval_mode": "allow_all"}, 422, "invalid_request"),  # not enabled here
        ({"provider": "codex"}, 503, "provider_unavailable"),  # disabled here
    ],
)
def test_a_refused_change_leaves_the_session_as_it_was(
    shared: FakeGateway, body: dict[str, Any], status: int, slug: str
) -> None:
    with shared.client() as client:
        sid = create(client, shared)
        before = kept(client, sid)

        refused = configure(client, sid, **body)

        assert_problem(refused, status, slug)
        assert kept(client, sid) == before
        assert configured(client, sid) == []


def test_an_unknown_session_is_not_found(shared: FakeGateway) -> None:
    with shared.client() as client:
        assert_problem(configure(client, "ses_nope", model="opus"), 404, "not_found")


def test_a_running_turn_or_a_closed_session_refuses_a_change(fake_gateway: FakeGateway) -> None:
    with fake_gateway.client() as client:
        sid = create(client, fake_gateway)
        after = last_seq(client, sid)
        running = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}).json()

        busy = configure(client, sid, model="opus")

        assert assert_problem(busy, 409, "turn_in_progress")["turn_id"] == running["id"]
        assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
        assert follow(client, sid, after=after)[-1]["type"] == "turn.interrupted"
        assert configure(client, sid, model="opus").status_code == 200

        assert client.delete(f"/v1/sessions/{sid}").status_code == 200
        before = kept(client, sid)
        assert_problem(configure(client, sid, model="sonnet"), 409, "session_closed")
        assert kept(client, sid) == before


def test_no_turn_starts_while_the_session_is_being_configured(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    """Choosing the new provider probes it; the probe is held until the test lets it go, and
    meanwhile the session takes no turn and no second change."""
    gate = tmp_path / "gate"
    gate.mkdir()
    codex = fake_server_in(tmp_path / "bin", "codex")
    held = tmp_path / "bin" / "held-codex"
    held.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ] && [ -e "{gate}/armed" ]; then\n'
        f'  : > "{gate}/waiting"\n'
        "  i=0\n"
        f'  while [ ! -e "{gate}/open" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n'
        "fi\n"
        f'exec "{codex}" "$@"\n'
    )
    held.chmod(0o755)
    gateway = with_codex(
        make_fake_gateway,
        tmp_path,
        codex_executable=held,
        selection={"probe_ttl_s": 0.001},  # every choice probes
    )
    answers: list[httpx.Response] = []
    with gateway.client() as client:
        sid = create(client, gateway)
        (gate / "armed").touch()

        def change() -> None:
            with gateway.client() as other:
                answers.append(configure(other, sid, provider="codex"))

        changing = threading.Thread(target=change)
        changing.start()
        try:
            wait_until((gate / "waiting").exists, timeout=20, what="the probe")
            refused = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hello"})
            second = configure(client, sid, model="opus")
        finally:
            (gate / "open").touch()
            changing.join(timeout=30)

        assert_problem(refused, 409, "configure_in_progress")
        assert_problem(second, 409, "configure_in_progress")
        (answer,) = answers
        assert answer.status_code == 200, answer.text
        assert answer.json()["provider"] == "codex"
        assert client.get(f"/v1/sessions/{sid}/turns").json()["turns"] == []
        assert {e["provider"] for e in turn(client, sid, "hello")} == {"codex"}


def test_what_the_provider_cannot_do_is_refused_as_at_creation(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    """Gemini CLI chooses no model and, kept from trusting the workspace, refuses its
    privileged modes: a change that asks either of it is refused, on the session's own
    provider and on one it would move to."""
    gateway = make_fake_gateway(sessions=EVERY_MODE)
    # Its probe only runs ``--version``, which the fake ``claude`` answers.
    gateway.config["providers"]["acp:gemini"] = {
        "enabled": True,
        "executable": str(tmp_path / "bin" / "claude"),
        "env": {"GEMINI_API_KEY": "fake-gemini-key"},  # else it needs a login
    }
    gateway.start()
    with gateway.client() as client:
        body = {"workspace": str(gateway.workspace), "provider": "acp:gemini"}
        on_gemini = client.post("/v1/sessions", json=body)
        assert on_gemini.status_code == 201, on_gemini.text
        gemini = on_gemini.json()["id"]
        claude = create(client, gateway)
        before = {sid: kept(client, sid) for sid in (gemini, claude)}

        refusals = [
            (configure(client, gemini, approval_mode="auto_edits"), "approval_mode_refused"),
            (configure(client, gemini, model="gemini-pro"), "capabilities_unmet"),
            (
                configure(client, claude, provider="acp:gemini", approval_mode="allow_all"),
                "approval_mode_refused",
            ),
            (configure(client, claude, provider="acp:gemini", model="x"), "capabilities_unmet"),
        ]

        for response, slug in refusals:
            problem = assert_problem(response, 422, slug)
            assert problem["candidates"][0]["provider"] == "acp:gemini"
        assert 'providers."acp:gemini".project_config = true' in refusals[0][0].json()["detail"]
        assert "model_choice" in refusals[1][0].json()["detail"]
        assert {sid: kept(client, sid) for sid in (gemini, claude)} == before
        moved = configure(client, claude, provider="acp:gemini", approval_mode="read_only")
        assert moved.status_code == 200, moved.text


def test_a_websocket_session_configure_frame_changes_the_session_and_is_acknowledged(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid = create(client, fake_gateway)
        url = f"{fake_gateway.ws_url}/v1/sessions/{sid}/ws?after={last_seq(client, sid)}"
        with ws_connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            ws.send(json.dumps({"type": "session.configure"}))
            empty = ws_frames(ws, lambda f: f.get("type") == "error")[-1]
            ws.send(json.dumps({"type": "session.configure", "approval_mode": "allow_all"}))
            refused = ws_frames(ws, lambda f: f.get("type") == "error")[-1]
            ws.send(json.dumps({"type": "session.configure", "model": "opus"}))
            frames = ws_frames(ws, all_seen({"ack", "session.configured"}))

        assert empty["problem"]["status"] == 422
        assert "at least one" in empty["problem"]["detail"]
        assert refused["request"] == "session.configure"
        assert refused["problem"]["status"] == 422
        assert refused["problem"]["allowed"] == ["ask", "auto_edits", "read_only"]
        ack = next(f for f in frames if f["type"] == "ack")
        assert ack["request"] == "session.configure"
        assert ack["session"]["id"] == sid
        assert ack["session"]["model"] == "opus"
        event = next(f for f in frames if f["type"] == "session.configured")
        assert event["data"]["model"] == "opus"
        assert client.get(f"/v1/sessions/{sid}").json()["model"] == "opus"
