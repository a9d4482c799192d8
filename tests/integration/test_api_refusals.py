"""Bad input and bad callers get a clear 4xx problem and never start a CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.gateway import TOKEN, SseReader, follow
from tests.integration.conftest import FakeGateway, FakeGatewayFactory

PROBLEM = "application/problem+json"


def assert_problem(
    response: httpx.Response, status: int, slug: str | None = None
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["detail"]
    if slug is not None:
        assert body["type"].endswith(":" + slug)
    assert "Traceback" not in response.text
    return body


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
                "message": "unknown query parameter; this operation takes before, limit, status",
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
