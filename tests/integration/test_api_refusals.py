"""Bad input and bad callers get a clear 4xx problem and never start a CLI: unknown fields and
hostile prompts (T8), oversized and malformed input (T12), two turns at once (R15), bad cursors
(R17)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import TOKEN, SseReader, follow
from tests.integration.callers import (
    assert_problem,
    create,
    drain_until_closed,
    raw,
    session_count,
    untouched,
    ws_refusal,
)


@pytest.fixture
def gateway(fake_gateway: FakeGateway) -> FakeGateway:
    return fake_gateway


@pytest.fixture
def session(gateway: FakeGateway) -> dict[str, Any]:
    with gateway.client() as client:
        response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created


@pytest.fixture
def session_id(session: dict[str, Any]) -> str:
    return str(session["id"])


def test_unknown_session_is_404_everywhere(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        for method, path, body in [
            ("GET", "/v1/sessions/ses_missing", None),
            ("DELETE", "/v1/sessions/ses_missing", None),
            ("POST", "/v1/sessions/ses_missing/turns", {"prompt": "hi"}),
            ("GET", "/v1/sessions/ses_missing/turns/trn_x", None),
            ("GET", "/v1/sessions/ses_missing/events", None),
            ("POST", "/v1/sessions/ses_missing/interrupt", None),
            ("POST", "/v1/sessions/ses_missing/approvals/apr_x", {"decision": "allow"}),
        ]:
            assert_problem(client.request(method, path, json=body), 404, "not_found")
    assert gateway.spawns() == []


@pytest.mark.parametrize(
    ("workspace", "why"),
    [
        ("relative/path", "absolute"),
        ("{root}/../outside", "'..'"),
        ("/etc", "outside"),
        ("{root}/missing", "not an existing directory"),
        ("{root}/escape", "outside"),  # a symlink to /tmp
        ("{root}-evil", "outside"),  # a sibling sharing the root's prefix
        ("{root}/project\x00x", "NUL"),
    ],
)
def test_workspace_outside_the_roots_is_refused(
    gateway: FakeGateway, workspace: str, why: str
) -> None:
    root = gateway.workspace.parent
    (root / "escape").unlink(missing_ok=True)
    (root / "escape").symlink_to("/tmp")
    Path(f"{root}-evil").mkdir(exist_ok=True)
    with gateway.client() as client:
        response = client.post("/v1/sessions", json={"workspace": workspace.format(root=root)})
        body = assert_problem(response, 422, "workspace_rejected")
        assert why in body["detail"]
        assert client.get("/v1/sessions").json()["sessions"] == []
    assert gateway.spawns() == []


def test_malformed_unknown_and_oversize_bodies_are_refused(
    gateway: FakeGateway, session: dict[str, Any]
) -> None:
    turns = f"/v1/sessions/{session['id']}/turns"
    with gateway.client() as client:
        headers = {"Content-Type": "application/json"}
        assert_problem(client.post(turns, content=b"{not json", headers=headers), 422)
        assert_problem(client.post(turns, json={"prompt": ""}), 422)
        assert_problem(client.post(turns, json={"prompt": "hi", "shell": True}), 422)
        assert_problem(
            client.post("/v1/sessions", json={"workspace": str(gateway.workspace), "model": "--x"}),
            422,
        )
        body = assert_problem(
            client.post(
                "/v1/sessions",
                json={"workspace": str(gateway.workspace), "approval_mode": "allow_all"},
            ),
            422,
        )
        assert "sessions.allowed_approval_modes" in body["detail"]
        big = json.dumps({"prompt": "x" * 2_000_000}).encode()
        assert_problem(client.post(turns, content=big, headers=headers), 413, "payload_too_large")

        def chunks() -> Any:
            for _ in range(40):
                yield b" " * 65536
            yield b'{"prompt": "hi"}'

        assert_problem(client.post(turns, content=chunks(), headers=headers), 413)
        assert client.get(f"/v1/sessions/{session['id']}/turns").json()["turns"] == []
    assert gateway.spawns() == []


def test_missing_or_wrong_token_is_401_on_rest_sse_and_websocket(
    gateway: FakeGateway, session: dict[str, Any]
) -> None:
    sid = session["id"]
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        with httpx.Client(base_url=gateway.base_url, headers=headers) as client:
            assert_problem(client.get("/v1/sessions"), 401, "unauthorized")
            assert_problem(client.post("/v1/sessions", json={"workspace": "/tmp"}), 401)
            assert_problem(client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}), 401)
            assert_problem(client.post(f"/v1/sessions/{sid}/interrupt"), 401)
            assert_problem(client.get("/readyz"), 401)
            sse = client.get(f"/v1/sessions/{sid}/events", headers={"Accept": "text/event-stream"})
            assert_problem(sse, 401)
        with pytest.raises(InvalidStatus) as refused:
            connect(f"{gateway.ws_url}/v1/sessions/{sid}/ws", additional_headers=headers)
        assert refused.value.response.status_code == 401
    wrong_query = httpx.get(
        f"{gateway.base_url}/v1/sessions/{sid}/events", params={"access_token": "nope"}
    )
    assert_problem(wrong_query, 401)
    assert httpx.get(f"{gateway.base_url}/healthz").json() == {"status": "ok"}
    with gateway.client() as client:
        assert client.get(f"/v1/sessions/{sid}").json()["process"] is None
    assert gateway.spawns() == []
    assert TOKEN not in gateway.log()


def test_token_in_the_query_string_works_for_browsers_and_is_not_logged(
    gateway: FakeGateway, session: dict[str, Any]
) -> None:
    url = f"{gateway.base_url}/v1/sessions/{session['id']}/events"
    sse = {"Accept": "text/event-stream"}
    with httpx.stream("GET", url, params={"access_token": TOKEN}, headers=sse) as stream:
        assert stream.status_code == 200
        assert next(iter(SseReader(stream))).json()["type"] == "session.created"
    # Only EventSource needs it: the JSON page wants the header, like every other route.
    assert_problem(httpx.get(url, params={"access_token": TOKEN}), 401)
    assert TOKEN not in gateway.log()


def test_foreign_host_and_websocket_origin_are_refused(
    gateway: FakeGateway, session: dict[str, Any]
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for host in ("attacker.example", "127.0.0.1.attacker.example", "localhost@evil"):
        response = httpx.get(f"{gateway.base_url}/v1/sessions", headers={**auth, "Host": host})
        assert_problem(response, 403, "host_not_allowed")
    url = f"{gateway.ws_url}/v1/sessions/{session['id']}/ws"
    for origin in ("https://evil.example", f"http://127.0.0.1:{gateway.port}.evil.example"):
        with pytest.raises(InvalidStatus) as refused:
            connect(url, additional_headers={**auth, "Origin": origin})
        assert refused.value.response.status_code == 403
    with connect(
        url, additional_headers={**auth, "Origin": f"http://127.0.0.1:{gateway.port}"}
    ) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "session.created"


def test_bad_cursors_are_refused(gateway: FakeGateway, session: dict[str, Any]) -> None:
    events = f"/v1/sessions/{session['id']}/events"
    with gateway.client() as client:
        for value in ("abc", "-1", "1e3", str(2**64), "99"):
            assert_problem(client.get(events, headers={"Last-Event-ID": value}), 422)
            assert_problem(client.get(events, params={"after": value}), 422)
        assert client.get(events, params={"after": "1"}).json()["events"][0]["seq"] == 2


def test_an_unknown_query_parameter_is_refused_naming_the_known_ones(
    gateway: FakeGateway, session: dict[str, Any]
) -> None:
    events = f"/v1/sessions/{session['id']}/events"
    with gateway.client() as client:
        typo = assert_problem(client.get("/v1/sessions", params={"limt": "5"}), 422)
        assert typo["errors"] == [
            {
                "location": "query.limt",
                "message": "unknown query parameter; this operation takes before, limit, "
                "provider, q, status",
            }
        ]
        none = assert_problem(client.get(f"/v1/sessions/{session['id']}", params={"x": "1"}), 422)
        assert none["errors"][0]["message"] == "unknown query parameter; this operation takes none"
        assert_problem(client.post(f"{events.removesuffix('/events')}/turns?dry=1", json={}), 422)
        assert client.get("/v1/sessions", params={"limit": "5"}).status_code == 200
        assert client.get(events, params={"after": "0", "limit": "5"}).status_code == 200
    # A caller without a key learns only that it needs one.
    keyless = httpx.get(f"{gateway.base_url}/v1/sessions", params={"limt": "5"})
    assert_problem(keyless, 401)
    # EventSource's access_token is a parameter of the events stream.
    url = f"{gateway.base_url}{events}"
    sse = {"Accept": "text/event-stream"}
    with httpx.stream("GET", url, params={"access_token": TOKEN, "after": "0"}, headers=sse) as ok:
        assert ok.status_code == 200
        assert next(iter(SseReader(ok))).json()["type"] == "session.created"
    assert gateway.spawns() == []


def test_cli_environment_is_allow_listed(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway()
    gateway.extra_env = {
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "DATABASE_PASSWORD": "db-secret-value",
    }
    gateway.start()
    with gateway.client() as client:
        sid = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()["id"]
        assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}).status_code == 202
        assert follow(client, sid)[-1]["type"] == "turn.completed"
    spawns = gateway.spawns()
    assert len(spawns) == 1
    env = spawns[0]["env"]
    dumped = json.dumps(env)
    for secret in (TOKEN, "aws-secret-value", "db-secret-value", "gateway.db"):
        assert secret not in dumped
    assert not any(name.startswith("GATEWAY_") for name in env)
    assert env["FAKE_CLAUDE_LOG"] == str(gateway.spawn_log)
    assert env["DISABLE_AUTOUPDATER"] == "1"


# --- T8: argv is fixed, the prompt travels over stdin, unknown fields are refused ----------


def test_t8_hostile_prompts_arrive_verbatim_over_stdin_and_never_in_argv(
    gateway: FakeGateway,
) -> None:
    hostile = ["--dangerously-skip-permissions", "; rm -rf /tmp/x", "$(touch /tmp/pwned) `id`"]
    with gateway.client() as client:
        sid = create(client, gateway)
        for prompt in hostile:
            after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
            started = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt})
            assert started.status_code == 202
            assert follow(client, sid, after=after)[-1]["type"] == "turn.completed"
    prompts_log = Path(str(gateway.spawn_log) + ".prompts")
    prompts = [json.loads(line)["prompt"] for line in prompts_log.read_text().splitlines()]
    assert [p for p in prompts if p in hostile] == hostile
    argv = [arg for spawn in gateway.spawns() for arg in spawn["argv"]]
    for prompt in hostile:
        assert not any(prompt in arg for arg in argv)
    assert "--dangerously-skip-permissions" not in argv
    assert not Path("/tmp/pwned").exists()


FORBIDDEN_FIELDS = ["permission_mode", "mcp_servers", "env", "command", "executable", "args"]


def test_t8_caller_cannot_pass_permission_mode_mcp_env_or_commands(gateway: FakeGateway) -> None:
    workspace = str(gateway.workspace)
    with gateway.client() as client:
        sid = create(client, gateway)
        before = session_count(gateway)
        targets = [
            ("/v1/sessions", {"workspace": workspace}),
            (f"/v1/sessions/{sid}/turns", {"prompt": "hi"}),
            ("/v1/runs", {"workspace": workspace, "prompt": "hi"}),
        ]
        for path, body in targets:
            for field in FORBIDDEN_FIELDS:
                refused = client.post(path, json={**body, field: "bypassPermissions"})
                problem = assert_problem(refused, 422, "validation_failed")
                assert field in problem["detail"]
        for mode in ("bypass", "allow_all", "bypassPermissions", "danger-full-access"):
            for path, body in targets[::2]:
                refused = client.post(path, json={**body, "approval_mode": mode})
                problem = assert_problem(refused, 422)
                assert "approval_mode" in problem["detail"]
    assert session_count(gateway) == before
    untouched(gateway, sid)


# --- T12: oversized and malformed input ----------------------------------------------------


def test_t12_big_and_deep_inputs_get_bounded_4xx_never_5xx(
    gateway: FakeGateway, session_id: str
) -> None:
    turns = f"/v1/sessions/{session_id}/turns"
    json_type = {"Content-Type": "application/json"}
    with gateway.client() as client:
        big = b'{"prompt": "' + b"x" * 10_000_000 + b'"}'
        assert_problem(client.post(turns, content=big, headers=json_type), 413, "payload_too_large")
        for depth in (100_000, 5_000, 500):
            deep = b'{"workspace": "/x", "metadata": {"a": ' + b"[" * depth + b"]" * depth + b"}}"
            response = client.post("/v1/sessions", content=deep, headers=json_type)
            assert_problem(response, 422)
            assert len(response.content) < 4096
        bare = b"[" * 100_000
        response = client.post(turns, content=bare, headers=json_type)
        assert_problem(response, 422)
        assert len(response.content) < 4096
        assert client.get(turns).json()["turns"] == []
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    host = b"Host: 127.0.0.1:%d\r\n" % gateway.port
    for extra in (
        b"X-Big: " + b"a" * 100_000 + b"\r\n",
        b"".join(b"X-%d: a\r\n" % i for i in range(5000)),
    ):
        status, answer = raw(
            gateway.port,
            b"GET /v1/sessions HTTP/1.1\r\n" + host + auth + extra + b"Connection: close\r\n\r\n",
        )
        assert status in (400, 413, 431), answer[:300]
    url = f"{gateway.ws_url}/v1/sessions/{session_id}/ws"
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}, max_size=None) as ws:
        ws.send(json.dumps({"type": "turn.start", "prompt": "x" * (1024 * 1024 + 10)}))
        closed = drain_until_closed(ws)
        assert closed.rcvd is not None
        assert closed.rcvd.code == 1009  # message too big
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send("[" * 10_000)
        frames = [json.loads(ws.recv(timeout=10)) for _ in range(3)]
        assert any(f["type"] == "error" for f in frames), frames
    with gateway.client() as client:
        assert client.get(turns).json()["turns"] == []
    assert "Traceback" not in gateway.log()


# --- R15: two turns at once ----------------------------------------------------------------


def test_r15_two_simultaneous_turns_give_one_202_and_one_409(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = create(client, gateway)
    barrier = threading.Barrier(2)
    answers: list[httpx.Response] = []

    def post() -> None:
        with gateway.client() as client:
            barrier.wait(timeout=30)
            answers.append(client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}))

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(a.status_code for a in answers) == [202, 409]
    accepted = next(a for a in answers if a.status_code == 202).json()
    conflict = assert_problem(next(a for a in answers if a.status_code == 409), 409)
    assert conflict["turn_id"] == accepted["id"]
    with gateway.client() as client:
        assert len(client.get(f"/v1/sessions/{sid}/turns").json()["turns"]) == 1
        follow(client, sid, lambda e: e["type"] == "message.delta")  # the CLI is streaming
        assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
        assert follow(client, sid)[-1]["type"] == "turn.interrupted"


# --- R17: cursors --------------------------------------------------------------------------

BAD_CURSORS = ["abc", "-1", "1e3", "1.0", "+1", "0x10", str(2**64), "١٢", "²", "1_0", "99999"]


def test_r17_bad_cursors_are_422_and_never_another_sessions_events(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        busy, quiet = create(client, gateway), create(client, gateway)
        assert client.post(f"/v1/sessions/{busy}/turns", json={"prompt": "hi"}).status_code == 202
        assert follow(client, busy)[-1]["type"] == "turn.completed"
        busy_last = client.get(f"/v1/sessions/{busy}").json()["last_seq"]
        quiet_last = client.get(f"/v1/sessions/{quiet}").json()["last_seq"]
        assert busy_last > quiet_last
        events = f"/v1/sessions/{quiet}/events"
        for value in [*BAD_CURSORS, " 1", "1 ", str(busy_last)]:
            assert_problem(client.get(events, params={"after": value}), 422)
            header = value.encode("utf-8")
            if value.strip() != value:
                continue  # not a legal header value (HTTP trims a value's whitespace)
            assert_problem(client.get(events, headers={b"Last-Event-ID": header}), 422)
            sse = client.get(
                events, headers={b"Last-Event-ID": header, b"Accept": b"text/event-stream"}
            )
            assert_problem(sse, 422)
            refused = ws_refusal(
                f"{gateway.ws_url}{events.removesuffix('/events')}/ws?after={quote(value)}",
                {"Authorization": f"Bearer {TOKEN}"},
            )
            assert refused.response.status_code == 422
        for empty in ({"headers": {"Last-Event-ID": ""}}, {"params": {"after": ""}}):
            assert_problem(client.get(events, **empty), 422)  # type: ignore[arg-type]
        replay = client.get(events).json()
        assert [e["seq"] for e in replay["events"]] == list(range(1, quiet_last + 1))
        page = client.get(events, headers={"Last-Event-ID": "1"}).json()["events"]
        assert {e["session_id"] for e in page} == {quiet}
        assert [e["seq"] for e in page] == list(range(2, quiet_last + 1))
    assert "Traceback" not in gateway.log()
