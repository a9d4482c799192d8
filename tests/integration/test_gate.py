"""The gate in front of every route: a key on each, the Host allow-list, origins, no cookie
authentication and the query token only for streams (threats T1, T3, T4, T5), checked on the
route table and against a real gateway process."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute, APIWebSocketRoute
from websockets.sync.client import connect

from app.api.security import AUTH_DEPENDENCIES
from app.main import create_app
from app.settings import load_settings
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_gateway_at
from tests.gateway import TOKEN, SseReader
from tests.integration.callers import (
    KEYS,
    OPEN_ROUTES,
    assert_problem,
    create,
    raw,
    raw_upgrade,
    route_table,
    routes,
    session_count,
    untouched,
    ws_refusal,
)


def app_routes(tmp_path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    settings = load_settings(
        server={"token": TOKEN},
        storage={"data_dir": str(tmp_path / "routes")},
        workspaces={"roots": [str(tmp_path)]},
    )
    return route_table(create_app(settings))


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


# --- T1: every route needs a key -----------------------------------------------------------


def _calls(dependant: object) -> set[object]:
    found = {getattr(dependant, "call", None)}
    for child in getattr(dependant, "dependencies", []):
        found |= _calls(child)
    return found


def test_every_api_route_depends_on_the_token(tmp_path: Path) -> None:
    settings = load_settings(
        storage={"data_dir": str(tmp_path)}, workspaces={"roots": [str(tmp_path)]}
    )
    app = create_app(settings)
    checked = 0
    open_routes: set[str] = set()
    for route in routes(app):
        if isinstance(route, APIRoute):
            if route.path in OPEN_ROUTES:
                assert not AUTH_DEPENDENCIES & _calls(route.dependant)
                assert route.methods == {"GET"}, f"{route.path} is open for reading only"
                open_routes.add(route.path)
                continue
            assert AUTH_DEPENDENCIES & _calls(route.dependant), f"{route.path} has no token check"
            checked += 1
        elif isinstance(route, APIWebSocketRoute):
            source = route.endpoint.__code__.co_names
            assert "require_ws_token" in source, f"{route.path} has no token check"
            checked += 1
        else:
            raise AssertionError(f"unexpected route {route!r}: every route must be an API route")
    assert checked >= 15
    assert open_routes == OPEN_ROUTES


def test_metrics_answer_without_a_key_only_when_metrics_public_is_set(tmp_path: Path) -> None:
    for public in (False, True):
        settings = load_settings(
            server={"metrics_public": public}, storage={"data_dir": str(tmp_path)}
        )
        (route,) = [
            r
            for r in routes(create_app(settings))
            if isinstance(r, APIRoute) and r.path == "/metrics"
        ]
        assert bool(AUTH_DEPENDENCIES & _calls(route.dependant)) is not public


def test_t1_every_route_sse_and_websocket_without_a_token_is_401(
    gateway: FakeGateway, session_id: str, tmp_path: Path
) -> None:
    http, ws = app_routes(tmp_path)
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


# --- T3: the Host allow-list, first, everywhere ---------------------------------------------


def test_t3_foreign_host_is_403_on_every_route_sse_and_websocket(
    gateway: FakeGateway, session_id: str, tmp_path: Path
) -> None:
    http, ws = app_routes(tmp_path)
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
        "Access-Control-Request-Headers": "authorization,content-type,idempotency-key",
    }
    with httpx.Client(base_url=gateway.base_url, timeout=30) as anonymous:
        preflight = anonymous.options("/v1/sessions", headers={"Origin": listed, **request})
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["access-control-allow-origin"] == listed
        assert "access-control-allow-credentials" not in preflight.headers
        allowed = preflight.headers["access-control-allow-headers"].lower()
        assert {"authorization", "idempotency-key"} <= {h.strip() for h in allowed.split(",")}
        for origin in FOREIGN_ORIGINS:
            refused = anonymous.options("/v1/sessions", headers={"Origin": origin, **request})
            assert_problem(refused, 403, "origin_not_allowed")
            assert "access-control-allow-origin" not in refused.headers
    with gateway.client() as client:
        answer = client.get("/v1/sessions", headers={"Origin": listed})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == listed
        # A browser's script may read whether an answer was replayed, and when to retry.
        exposed = answer.headers["access-control-expose-headers"].lower()
        assert {"idempotent-replayed", "retry-after"} <= {h.strip() for h in exposed.split(",")}
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
