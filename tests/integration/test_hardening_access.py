"""Who may call the gateway and what a request may do, against a real gateway process.

Each test is named after the threat-model item it proves (T1 to T14, R15, R17). Requests that
httpx cannot express (two Host headers, absolute-form targets, huge heads) go over raw
sockets.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.routing import APIRoute, APIWebSocketRoute
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from app.main import create_app
from app.settings import load_settings
from tests.gateway import ROOT, TOKEN, SseReader, follow
from tests.integration.conftest import FakeGateway, FakeGatewayFactory, fake_gateway_at

PROBLEM = "application/problem+json"
ALICE = "alice-key-0123456789abcdefghijklmnopqrstuvwxyz"
BOB = "bob-key-0123456789abcdefghijklmnopqrstuvwxyz0123"
KEYS = {"api_keys": [{"name": "alice", "token": ALICE}, {"name": "bob", "token": BOB}]}
FAKE_PROVIDER_KEY = "sk-ant-api03-FAKEfakeFAKEfake0123456789-abcdefABCDEF"
OPEN_ROUTES = {"/healthz", "/console", "/console/", "/console/{name}"}
"""/healthz, and the console's static files (app/api/console.py); every other route needs a key."""


def assert_problem(
    response: httpx.Response, status: int, slug: str | None = None
) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["detail"]
    if slug is not None:
        assert body["type"] == f"urn:agent-gateway:problem:{slug}", body
    assert "Traceback" not in response.text
    return body


def as_key(gateway: FakeGateway, token: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=gateway.base_url, headers=headers, timeout=30.0)


def create(client: httpx.Client, gateway: FakeGateway) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def raw(port: int, head: bytes, body: bytes = b"") -> tuple[int, str]:
    """Send bytes as they are; the status and the raw answer (status 0: closed unanswered)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # The server may answer and close before it has read everything.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(head + body)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    text = answer.decode("latin-1")
    match = re.match(r"HTTP/1\.1 (\d{3})", text)
    return (int(match.group(1)) if match else 0), text


def raw_upgrade(port: int, path: str, *headers: str) -> tuple[int, str]:
    """A WebSocket upgrade with exactly the headers given (Host included); its HTTP answer."""
    head = [
        f"GET {path} HTTP/1.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *headers,
    ]
    return raw(port, ("\r\n".join(head) + "\r\n\r\n").encode())


def drain_until_closed(ws: ClientConnection) -> ConnectionClosed:
    """Read frames until the server closes the connection; the close."""
    for _ in range(1000):
        try:
            ws.recv(timeout=10)
        except ConnectionClosed as closed:
            return closed
    raise AssertionError("the server kept the connection open")


def ws_refusal(url: str, headers: dict[str, str]) -> InvalidStatus:
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers=headers, open_timeout=10)
    return refused.value


def route_table(tmp_path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """(method, path) of every HTTP route and the paths of the WebSocket routes, from the app."""
    settings = load_settings(
        server={"token": TOKEN},
        storage={"data_dir": str(tmp_path / "routes")},
        workspaces={"roots": [str(tmp_path)]},
    )

    def flat(routes: list[Any]) -> Iterator[Any]:
        for route in routes:
            included = getattr(route, "original_router", None)
            yield from flat(list(included.routes)) if included is not None else [route]

    http: list[tuple[str, str]] = []
    ws: list[str] = []
    for route in flat(list(create_app(settings).routes)):
        if isinstance(route, APIRoute):
            http.extend((method, route.path) for method in sorted(route.methods or ()))
        elif isinstance(route, APIWebSocketRoute):
            ws.append(route.path)
    return http, ws


def concrete(path: str, session_id: str) -> str:
    values = {"session_id": session_id, "turn_id": "trn_x", "approval_id": "apr_x"}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "claude_code"), path)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGateway]:
    """One gateway for the tests that leave it as they found it (starting one takes seconds).

    Its failure budget is raised: these tests send many unauthenticated requests.
    """
    gateway = fake_gateway_at(
        tmp_path_factory.mktemp("shared"),
        server=KEYS,
        limits={"auth_failures_per_minute": 100_000},
    )
    gateway.start()
    yield gateway
    gateway.stop()


@pytest.fixture
def gateway(shared: FakeGateway) -> FakeGateway:
    return shared


@pytest.fixture
def session_id(gateway: FakeGateway) -> str:
    with gateway.client() as client:
        return create(client, gateway)


def untouched(gateway: FakeGateway, session_id: str) -> None:
    """The session ran no turn and has no CLI process."""
    with gateway.client() as client:
        assert client.get(f"/v1/sessions/{session_id}/turns").json()["turns"] == []
        session = client.get(f"/v1/sessions/{session_id}").json()
        assert session["process"] is None
        assert session["status"] == "idle"


def session_count(gateway: FakeGateway) -> int:
    with gateway.client() as client:
        return len(client.get("/v1/sessions", params={"limit": 500}).json()["sessions"])


# --- T1: every route needs a key; no root --------------------------------------------------


def test_t1_every_route_sse_and_websocket_without_a_token_is_401(
    gateway: FakeGateway, session_id: str, tmp_path: Path
) -> None:
    http, ws = route_table(tmp_path)
    guarded = [(m, p) for m, p in http if p not in OPEN_ROUTES]
    assert len(guarded) >= 15
    wrong_keys: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ]
    for headers in wrong_keys:
        with httpx.Client(base_url=gateway.base_url, headers=headers, timeout=30) as client:
            for method, path in guarded:
                url = concrete(path, session_id)
                body: dict[str, Any] | None = {} if method == "POST" else None
                assert_problem(client.request(method, url, json=body), 401, "unauthorized")
                if method == "POST":  # a body that is not JSON says nothing about the schema
                    response = client.request(
                        method, url, content=b"{", headers={"Content-Type": "application/json"}
                    )
                    assert_problem(response, 401, "unauthorized")
            sse = client.get(
                f"/v1/sessions/{session_id}/events", headers={"Accept": "text/event-stream"}
            )
            assert_problem(sse, 401, "unauthorized")
        assert ws, "the app has a WebSocket route"
        for path in ws:
            refused = ws_refusal(gateway.ws_url + concrete(path, session_id), headers)
            assert refused.response.status_code == 401
    untouched(gateway, session_id)
    assert httpx.get(gateway.base_url + "/healthz").json() == {"status": "ok"}
    assert {path for _, path in http} >= OPEN_ROUTES
    assert all(method == "GET" for method, path in http if path in OPEN_ROUTES)
    for path in ("/console/", "/console/app.js", "/console/app.css"):  # static, no data
        assert httpx.get(gateway.base_url + path).status_code == 200


def test_t1_serve_refuses_to_run_as_root_unless_allowed(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("runs only as root; tests/unit/test_token.py checks the rule with any euid")
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'[server]\ntoken = "{TOKEN}"\nallow_root = false\n'
        f'[storage]\ndata_dir = "{tmp_path}"\n[workspaces]\nroots = ["{tmp_path}"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    refused = subprocess.run(
        [sys.executable, "-m", "app", "--config", str(config), "serve", "--port", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "root" in refused.stderr
    assert "server.allow_root" in refused.stderr
    assert "GATEWAY_SERVER__ALLOW_ROOT" in refused.stderr
    assert "Traceback" not in refused.stderr


# --- T2: no network exposure before a token exists ------------------------------------------


def serve_on(tmp_path: Path, host: str) -> subprocess.CompletedProcess[str]:
    """``serve --host <host>`` with no server.token, data in ``tmp_path``, no database yet."""
    config = tmp_path / "gateway.toml"
    config.write_text(
        f"[server]\nallow_root = true\n"
        f'[storage]\ndata_dir = "{tmp_path}"\n[workspaces]\nroots = ["{tmp_path}"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    return subprocess.run(
        [sys.executable, "-m", "app", "--config", str(config), "serve", "--host", host],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_t2_non_loopback_bind_without_any_token_yet_refuses(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "192.0.2.10"):  # noqa: S104 - the refusal is the point
        refused = serve_on(tmp_path, host)
        assert refused.returncode == 2, refused.stderr
        assert "reachable from other machines" in refused.stderr
        assert "server.token" in refused.stderr
        assert "GATEWAY_SERVER__TOKEN" in refused.stderr
        assert "agent-gateway token rotate" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert not (tmp_path / "token").exists()
    assert not (tmp_path / "gateway.db").exists()  # refused before anything was created


def test_t2_a_token_file_made_before_the_start_counts_as_explicit(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("operator-token-0123456789abcdefghijklmnopqrstuvwxyz\n")
    # A database of a newer gateway: serving stops at the schema check, after the exposure
    # check, before binding (192.0.2.10 is a documentation address no machine here has).
    with closing(sqlite3.connect(tmp_path / "gateway.db")) as db, db:
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        db.execute("INSERT INTO alembic_version VALUES ('f00d')")
    passed = serve_on(tmp_path, "192.0.2.10")
    assert passed.returncode == 2, passed.stderr
    assert "reachable from other machines" not in passed.stderr
    assert "is at revision f00d, which this gateway" in passed.stderr
    assert "Traceback" not in passed.stderr


# --- T3: the Host allow-list, first, everywhere ---------------------------------------------


def test_t3_foreign_host_is_403_on_every_route_sse_and_websocket(
    gateway: FakeGateway, session_id: str, tmp_path: Path
) -> None:
    http, ws = route_table(tmp_path)
    hosts = ["attacker.example", "attacker.example:80", "127.0.0.1.attacker.example", "[::2]"]
    with gateway.client() as client:
        for host in hosts:
            for method, path in http:
                url = concrete(path, session_id)
                response = client.request(
                    method, url, json={} if method == "POST" else None, headers={"Host": host}
                )
                assert_problem(response, 403, "host_not_allowed")
            sse = client.get(
                f"/v1/sessions/{session_id}/events",
                headers={"Host": host, "Accept": "text/event-stream"},
            )
            assert_problem(sse, 403, "host_not_allowed")
            for path in ws:
                status, answer = raw_upgrade(
                    gateway.port,
                    concrete(path, session_id),
                    f"Host: {host}",
                    f"Authorization: Bearer {TOKEN}",
                )
                assert status == 403, answer
                assert "host_not_allowed" in answer
        allowed = client.get("/v1/sessions", headers={"Host": f"localhost:{gateway.port}"})
        assert allowed.status_code == 200
    untouched(gateway, session_id)


def test_t3_two_hosts_absolute_targets_and_odd_host_values_are_refused(
    gateway: FakeGateway,
) -> None:
    auth = f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n".encode()

    def get(target: bytes, *hosts: bytes) -> tuple[int, str]:
        head = b"GET " + target + b" HTTP/1.1\r\n"
        head += b"".join(b"Host: " + h + b"\r\n" for h in hosts)
        return raw(gateway.port, head + auth + b"\r\n")

    good = b"127.0.0.1:%d" % gateway.port
    assert get(b"/v1/sessions", good)[0] == 200  # the same request, well-formed, is served
    for hosts in ((good, b"attacker.example"), (b"attacker.example", good), (good, good)):
        status, answer = get(b"/v1/sessions", *hosts)
        assert status == 400, answer
        assert '"sessions"' not in answer
    for target in (
        b"http://attacker.example/v1/sessions",
        b"http://" + good + b"/v1/sessions",
        b"//attacker.example/v1/sessions",
    ):
        status, answer = get(target, good)
        assert status in (400, 403, 404), answer
        assert '"sessions"' not in answer
    for host in (b"127.0.0.1@attacker.example", b"user@127.0.0.1", b"127.0.0.1/x", b"127.0.0.1?"):
        status, answer = get(b"/v1/sessions", host)
        assert status in (400, 403), answer
        assert '"sessions"' not in answer
    status, answer = get(b"/v1/sessions")  # no Host at all
    assert status in (400, 403), answer


# --- T4: origins --------------------------------------------------------------------------

FOREIGN_ORIGINS = [
    "https://ok.example.com.evil.com",
    "https://ok.example.comedy",
    "null",
    "http://ok.example.com",  # another scheme
    "https://ok.example.com:8443",  # another port
    "https://ok.example.com/",  # a trailing path
    "https://ok.example.com/app",
    "https://user@ok.example.com",
    "https://evil.example",
]


def test_t4_foreign_origins_are_403_on_http_and_websocket_and_no_cors_by_default(
    gateway: FakeGateway, session_id: str
) -> None:
    own = f"http://127.0.0.1:{gateway.port}"
    foreign = [*FOREIGN_ORIGINS, f"{own}.evil.example", f"http://localhost:{gateway.port}"]
    foreign += [f"https://127.0.0.1:{gateway.port}", f"{own}/", "http://127.0.0.1"]
    url = f"{gateway.ws_url}/v1/sessions/{session_id}/ws"
    before = session_count(gateway)
    with gateway.client() as client:
        for origin in foreign:
            assert_problem(
                client.get("/v1/sessions", headers={"Origin": origin}), 403, "origin_not_allowed"
            )
            response = client.post(
                "/v1/sessions",
                json={"workspace": str(gateway.workspace)},
                headers={"Origin": origin},
            )
            assert_problem(response, 403, "origin_not_allowed")
            refused = ws_refusal(url, {"Authorization": f"Bearer {TOKEN}", "Origin": origin})
            assert refused.response.status_code == 403
        assert session_count(gateway) == before
        same = client.get("/v1/sessions", headers={"Origin": own})
        assert same.status_code == 200
        assert not any(h.lower().startswith("access-control-") for h in same.headers)
        preflight = client.options(
            "/v1/sessions",
            headers={"Origin": own, "Access-Control-Request-Method": "POST"},
        )
        assert not any(h.lower().startswith("access-control-") for h in preflight.headers)
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}", "Origin": own}) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "session.created"


def test_t4_cors_preflight_works_for_listed_origins_only_never_a_wildcard(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    listed = "https://ok.example.com"
    gateway = make_fake_gateway(server={"allowed_origins": [listed]}).start()
    request = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    with httpx.Client(base_url=gateway.base_url, timeout=30) as anonymous:
        preflight = anonymous.options("/v1/sessions", headers={"Origin": listed, **request})
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["access-control-allow-origin"] == listed
        assert "access-control-allow-credentials" not in preflight.headers
        assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
        for origin in FOREIGN_ORIGINS:
            refused = anonymous.options("/v1/sessions", headers={"Origin": origin, **request})
            assert_problem(refused, 403, "origin_not_allowed")
            assert "access-control-allow-origin" not in refused.headers
    with gateway.client() as client:
        answer = client.get("/v1/sessions", headers={"Origin": listed})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == listed
        assert "*" not in answer.headers.get("access-control-allow-origin", "")


# --- T5: no cookie authentication, query token only for streams ----------------------------


def test_t5_form_post_with_the_cookie_and_no_authorization_is_401_and_creates_nothing(
    gateway: FakeGateway, session_id: str
) -> None:
    cookies = {"agw_token": TOKEN}
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    before = session_count(gateway)
    with httpx.Client(base_url=gateway.base_url, cookies=cookies, timeout=30) as browser:
        created = browser.post(
            "/v1/sessions", content=f"workspace={gateway.workspace}".encode(), headers=form
        )
        assert_problem(created, 401, "unauthorized")
        turn = browser.post(f"/v1/sessions/{session_id}/turns", content=b"prompt=hi", headers=form)
        assert_problem(turn, 401, "unauthorized")
        deleted = browser.delete(f"/v1/sessions/{session_id}")
        assert_problem(deleted, 401, "unauthorized")
        assert_problem(browser.get("/v1/sessions"), 401, "unauthorized")
    assert session_count(gateway) == before
    untouched(gateway, session_id)


def test_t5_query_token_is_accepted_only_on_the_sse_stream_and_the_websocket(
    gateway: FakeGateway, session_id: str
) -> None:
    query = {"access_token": TOKEN}
    events = f"/v1/sessions/{session_id}/events"
    with httpx.Client(base_url=gateway.base_url, timeout=30) as anonymous:
        assert_problem(anonymous.get("/v1/sessions", params=query), 401)
        assert_problem(anonymous.get(events, params=query), 401)  # the JSON page
        assert_problem(
            anonymous.post(f"/v1/sessions/{session_id}/turns", params=query, json={"prompt": "x"}),
            401,
        )
        assert_problem(anonymous.get("/readyz", params=query), 401)
        with anonymous.stream(
            "GET", events, params=query, headers={"Accept": "text/event-stream"}
        ) as stream:
            assert stream.status_code == 200
            first = next(iter(SseReader(stream)))
            assert first.json()["type"] == "session.created"
    with connect(f"{gateway.ws_url}/v1/sessions/{session_id}/ws?access_token={TOKEN}") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "session.created"
    assert TOKEN not in gateway.log()


# --- T6: the workspace is checked again before a CLI is spawned ----------------------------


def test_t6_workspace_swapped_for_a_symlink_is_refused_and_nothing_is_spawned(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    gateway = fake_gateway
    outside = tmp_path / "outside"
    outside.mkdir()
    sibling = gateway.workspace.parent / "sibling"
    sibling.mkdir()
    with gateway.client() as client:
        escaped, moved = create(client, gateway), None
        project_b = gateway.workspace.parent / "project-b"
        project_b.mkdir()
        moved = client.post("/v1/sessions", json={"workspace": str(project_b)}).json()["id"]
        gateway.workspace.rmdir()
        gateway.workspace.symlink_to(outside)  # the directory is now a link out of the root
        project_b.rmdir()
        project_b.symlink_to(sibling)  # and this one a link elsewhere inside it
        for sid, why in ((escaped, "no longer resolves inside"), (moved, "another directory")):
            refused = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
            body = assert_problem(refused, 422, "workspace_rejected")
            assert why in body["detail"]
            assert client.get(f"/v1/sessions/{sid}/turns").json()["turns"] == []
            assert client.get(f"/v1/sessions/{sid}").json()["process"] is None
    assert gateway.spawns() == []


def test_t6_workspace_swapped_after_a_turn_refuses_the_next_turn(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    with gateway.client() as client:
        sid = create(client, gateway)
        assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}).status_code == 202
        assert follow(client, sid)[-1]["type"] == "turn.completed"
        real = gateway.workspace.with_name("project-real")
        gateway.workspace.rename(real)
        gateway.workspace.symlink_to("/etc")
        refused = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "again"})
        assert_problem(refused, 422, "workspace_rejected")
    assert len(gateway.spawns()) == 1  # the first turn's; none since the swap


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


# --- T9: the log never shows a key ---------------------------------------------------------


def test_t9_the_log_shows_no_token_key_or_provider_secret_after_failures(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS)
    gateway.config["providers"]["claude_code"]["env"]["ANTHROPIC_API_KEY"] = FAKE_PROVIDER_KEY
    gateway.start()
    with httpx.Client(base_url=gateway.base_url, timeout=30) as anonymous:
        for token in (TOKEN, ALICE, FAKE_PROVIDER_KEY):
            # Secrets in places an access log shows: the query string and the path.
            anonymous.get("/v1/sessions", params={"access_token": token, "token": token})
            anonymous.get(f"/v1/sessions/{token}", headers={"Authorization": "Bearer wrong"})
        anonymous.get("/v1/sessions", headers={"Authorization": f"Bearer {TOKEN[:-1]}"})
    with gateway.client() as client:
        client.get(f"/v1/sessions/{FAKE_PROVIDER_KEY}", params={"access_token": ALICE})
        client.get(f"/v1/sessions/{BOB}/events", params={"access_token": TOKEN})
        sid = create(client, gateway)
        failing = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "fail-auth"})
        assert failing.status_code == 202
        assert follow(client, sid)[-1]["type"] == "turn.failed"
        client.post("/v1/sessions", json={"workspace": "/etc", "metadata": {"k": TOKEN}})
    gateway.stop()
    log = gateway.log()
    assert "[redacted]" in log  # the lines were logged, with their secrets removed
    for secret in (TOKEN, ALICE, BOB, FAKE_PROVIDER_KEY, FAKE_PROVIDER_KEY[:20], TOKEN[:-1]):
        assert secret not in log
    assert "metadata" not in log  # request bodies are never logged


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


# --- T13: rate limits and caps -------------------------------------------------------------


def test_t13_session_creation_rate_per_key_gives_429_with_retry_after(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS, limits={"session_creates_per_minute": 3}).start()
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob:
        for _ in range(3):
            create(alice, gateway)
        refused = alice.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        problem = assert_problem(refused, 429, "rate_limited")
        assert problem["limit"] == "session_creates_per_minute"
        assert 1 <= int(refused.headers["retry-after"]) <= 20
        run = alice.post("/v1/runs", json={"workspace": str(gateway.workspace), "prompt": "hi"})
        assert_problem(run, 429, "rate_limited")
        create(bob, gateway)  # another key has its own budget
        assert len(alice.get("/v1/sessions").json()["sessions"]) == 3


def test_t13_open_sessions_per_key_are_capped_and_closing_one_frees_a_slot(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS, limits={"max_open_sessions_per_key": 2}).start()
    workspace = {"workspace": str(gateway.workspace)}
    with as_key(gateway, ALICE) as alice:
        first, _ = create(alice, gateway), create(alice, gateway)
        refused = alice.post("/v1/sessions", json=workspace)
        problem = assert_problem(refused, 429, "rate_limited")
        assert problem["limit"] == "max_open_sessions_per_key"
        assert "retry-after" in refused.headers
        assert alice.delete(f"/v1/sessions/{first}").status_code == 200
        create(alice, gateway)
    with gateway.client() as admin:
        create(admin, gateway)  # the admin key's own sessions count apart


def test_t13_concurrent_creations_beyond_the_caps_are_clean_429s(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(
        server=KEYS, limits={"max_open_sessions_per_key": 5, "session_creates_per_minute": 100}
    ).start()
    statuses: list[int] = []
    barrier = threading.Barrier(20)

    def attempt() -> None:
        with as_key(gateway, ALICE) as alice:
            barrier.wait(timeout=30)
            response = alice.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
            if response.status_code == 429:
                assert "retry-after" in response.headers
            statuses.append(response.status_code)

    threads = [threading.Thread(target=attempt) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(statuses) == [201] * 5 + [429] * 15
    with as_key(gateway, ALICE) as alice:
        assert len(alice.get("/v1/sessions").json()["sessions"]) == 5


def test_t13_auth_failures_back_off_per_address_while_correct_keys_still_pass(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(limits={"auth_failures_per_minute": 3}).start()
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        wrong = {"Authorization": "Bearer wrong"}
        for _ in range(3):
            assert_problem(client.get("/v1/sessions", headers=wrong), 401)
        limited = client.get("/v1/sessions", headers=wrong)
        problem = assert_problem(limited, 429, "rate_limited")
        assert problem["limit"] == "auth_failures_per_minute"
        assert 1 <= int(limited.headers["retry-after"]) <= 20
        assert_problem(client.get("/v1/sessions"), 429)
        right = client.get("/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200
    refused = ws_refusal(f"{gateway.ws_url}/v1/sessions/ses_x/ws", {"Authorization": "Bearer no"})
    assert refused.response.status_code == 429
    assert "retry-after" in refused.response.headers


def test_t13_limit_concurrency_reaches_uvicorn(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(server={"limit_concurrency": 4}).start()
    with gateway.client() as client:
        sid = create(client, gateway)
    sse = {"Accept": "text/event-stream", "Authorization": f"Bearer {TOKEN}"}
    clients = [httpx.Client(base_url=gateway.base_url, timeout=30) for _ in range(6)]
    streams: list[Any] = []
    try:
        statuses = []
        for one in clients:
            stream = one.stream("GET", f"/v1/sessions/{sid}/events", headers=sse)
            response = stream.__enter__()
            streams.append(stream)
            statuses.append(response.status_code)
            if response.status_code == 503:
                break
        assert statuses[-1] == 503, statuses
        assert len(statuses) <= 4
    finally:
        for stream in streams:
            stream.__exit__(None, None, None)
        for one in clients:
            one.close()


# --- T14: a key sees and drives only its own sessions --------------------------------------


def test_t14_a_key_cannot_read_stream_drive_or_delete_another_keys_session(
    gateway: FakeGateway,
) -> None:
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob:
        mine = create(alice, gateway)
        theirs = create(bob, gateway)
        assert alice.post(f"/v1/sessions/{mine}/turns", json={"prompt": "hi"}).status_code == 202
        assert follow(alice, mine)[-1]["type"] == "turn.completed"
        turn_id = alice.get(f"/v1/sessions/{mine}/turns").json()["turns"][0]["id"]

        alices = {s["id"] for s in alice.get("/v1/sessions").json()["sessions"]}
        bobs = {s["id"] for s in bob.get("/v1/sessions").json()["sessions"]}
        assert mine in alices
        assert theirs not in alices
        assert theirs in bobs
        assert mine not in bobs
        for method, path, body in [
            ("GET", f"/v1/sessions/{mine}", None),
            ("GET", f"/v1/sessions/{mine}/turns", None),
            ("GET", f"/v1/sessions/{mine}/turns/{turn_id}", None),
            ("GET", f"/v1/sessions/{mine}/events", None),
            ("GET", f"/v1/sessions/{mine}/approvals", None),
            ("POST", f"/v1/sessions/{mine}/turns", {"prompt": "from bob"}),
            ("POST", f"/v1/sessions/{mine}/approvals/apr_x", {"decision": "allow"}),
            ("POST", f"/v1/sessions/{mine}/interrupt", None),
            ("DELETE", f"/v1/sessions/{mine}", None),
        ]:
            stolen = bob.request(method, path, json=body)
            problem = assert_problem(stolen, 404, "not_found")
            missing = bob.request(method, path.replace(mine, "ses_" + "0" * 32), json=body)
            assert missing.status_code == 404
            assert problem["detail"] == missing.json()["detail"].replace("ses_" + "0" * 32, mine)
        sse = bob.get(f"/v1/sessions/{mine}/events", headers={"Accept": "text/event-stream"})
        assert_problem(sse, 404, "not_found")
        query = httpx.get(
            f"{gateway.base_url}/v1/sessions/{mine}/events",
            params={"access_token": BOB},
            headers={"Accept": "text/event-stream"},
        )
        assert_problem(query, 404)
        refused = ws_refusal(
            f"{gateway.ws_url}/v1/sessions/{mine}/ws", {"Authorization": f"Bearer {BOB}"}
        )
        assert refused.response.status_code == 404
        # Still Alice's, untouched: one turn, open.
        assert alice.get(f"/v1/sessions/{mine}").json()["status"] == "idle"
        assert len(alice.get(f"/v1/sessions/{mine}/turns").json()["turns"]) == 1
    prompts_log = Path(str(gateway.spawn_log) + ".prompts")
    assert "from bob" not in prompts_log.read_text()

    with gateway.client() as admin:
        listed = {s["id"] for s in admin.get("/v1/sessions").json()["sessions"]}
        assert {mine, theirs} <= listed
        assert admin.get(f"/v1/sessions/{mine}").json()["id"] == mine
        with connect(
            f"{gateway.ws_url}/v1/sessions/{theirs}/ws",
            additional_headers={"Authorization": f"Bearer {TOKEN}"},
        ) as ws:
            assert json.loads(ws.recv(timeout=10))["session_id"] == theirs
        assert admin.post(f"/v1/sessions/{theirs}/turns", json={"prompt": "hi"}).status_code == 202
        assert follow(admin, theirs)[-1]["type"] == "turn.completed"
        assert admin.delete(f"/v1/sessions/{theirs}").json()["status"] == "closed"


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
