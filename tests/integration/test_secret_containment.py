"""Threat models T9 and T19 (SECURITY.md): the log never shows a key, secrets stay in the
gateway, its files stay its user's.

Real gateway processes with the fake ``claude`` (``dump-env`` answers with its whole
environment; ``fail-auth-echo`` quotes its API key in the error, as a careless CLI might) and
the fake ``opencode serve`` (which records the environment it was started with).
"""

from __future__ import annotations

import base64
import json
import sqlite3
import stat
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory, fake_server_in
from tests.gateway import TOKEN, SseReader, follow, is_turn_end
from tests.integration.callers import ALICE, BOB, KEYS, assert_problem, create, ws_refusal

PROVIDER_SECRET = "provider-env-secret-0123456789"
GATEWAY_ENV_SECRET = "gateway-env-secret-9876543210"
AWS_SECRET = "aws-secret-access-key-abcdefghij"
FAKE_PROVIDER_KEY = "sk-ant-api03-FAKEfakeFAKEfake0123456789-abcdefABCDEF"


def everything_stored(gateway: FakeGateway) -> bytes:
    """The bytes of the database and its write-ahead log."""
    return b"".join(
        path.read_bytes()
        for path in gateway.data_dir.glob("gateway.db*")
        if not path.name.endswith(".lock")
    )


def run(client: httpx.Client, gateway: FakeGateway, prompt: str) -> tuple[str, Any, str]:
    """Run a turn, following it live over SSE; (session id, stored turn, SSE text)."""
    created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
    sid = created.json()["id"]
    headers = {"Accept": "text/event-stream", "Last-Event-ID": str(created.json()["last_seq"])}
    with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as stream:
        turn = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt}).json()
        live = json.dumps(SseReader(stream).until(is_turn_end))
    stored = client.get(f"/v1/sessions/{sid}/turns/{turn['id']}").json()
    return sid, stored, live


def test_t19_configured_secrets_never_reach_an_event_or_a_turn(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(
        claude_code={"env": {"ANTHROPIC_API_KEY": PROVIDER_SECRET}},
    )
    # A credential the CLI takes from the gateway's own environment (its passthrough list).
    gateway.extra_env["ANTHROPIC_AUTH_TOKEN"] = GATEWAY_ENV_SECRET
    gateway.start()
    with gateway.client() as client:
        sid, dumped, live = run(client, gateway, "dump-env")
        page = client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).text
        _, failed, failed_live = run(client, gateway, "fail-auth-echo")
    assert dumped["status"] == "completed"
    assert failed["status"] == "failed"
    # The CLI did print them: they are masked, not missing.
    assert '\\"ANTHROPIC_API_KEY\\": \\"[redacted]\\"' in live
    assert '\\"ANTHROPIC_AUTH_TOKEN\\": \\"[redacted]\\"' in live
    assert "[redacted]" in failed["error"]["message"]
    for shown in (live, page, json.dumps(dumped), failed_live, json.dumps(failed)):
        assert PROVIDER_SECRET not in shown
        assert GATEWAY_ENV_SECRET not in shown
    stored = everything_stored(gateway)
    assert PROVIDER_SECRET.encode() not in stored
    assert GATEWAY_ENV_SECRET.encode() not in stored
    assert PROVIDER_SECRET not in gateway.log()


def test_t19_the_data_directory_and_database_are_private_whatever_the_umask(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway()
    gateway.umask = 0o000  # everything would be world-readable and writable by default
    gateway.start()
    with gateway.client() as client:
        assert follow_one_turn(client, gateway)[-1]["type"] == "turn.completed"
    modes = {
        path.name: stat.S_IMODE(path.stat().st_mode)
        for path in gateway.data_dir.iterdir()
        if path.name.startswith(("gateway.db", "token")) or path.is_dir()
    }
    assert stat.S_IMODE(gateway.data_dir.stat().st_mode) == 0o700
    assert modes.pop("gateway.db") == 0o600
    assert modes.pop("gateway.db-wal") == 0o600
    assert modes.pop("gateway.db-shm") == 0o600
    assert modes.pop("gateway.db-migrate.lock") == 0o600
    for name, mode in modes.items():
        assert mode & 0o077 == 0, (name, oct(mode))


def test_t19_a_database_made_with_a_wide_mode_is_narrowed(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway()
    gateway.data_dir.mkdir(parents=True)
    gateway.data_dir.chmod(0o755)
    with closing(sqlite3.connect(gateway.data_dir / "gateway.db")):
        pass
    (gateway.data_dir / "gateway.db").chmod(0o644)  # as an earlier version left it
    gateway.start()
    assert stat.S_IMODE(gateway.data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((gateway.data_dir / "gateway.db").stat().st_mode) == 0o600


def follow_one_turn(client: httpx.Client, gateway: FakeGateway) -> list[dict[str, Any]]:
    sid = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).json()["id"]
    assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}).status_code == 202
    return follow(client, sid)


def test_t19_opencode_gets_only_the_credentials_of_its_configured_provider(
    make_fake_gateway: FakeGatewayFactory, tmp_path: Path
) -> None:
    log = tmp_path / "opencode.log"
    gateway = make_fake_gateway(
        opencode={
            "enabled": True,
            "executable": str(fake_server_in(tmp_path / "bin", "opencode")),
            "model": "anthropic/claude-sonnet-4-5",
            "env": {"FAKE_OPENCODE_LOG": str(log), "XDG_DATA_HOME": str(tmp_path / "oc")},
        },
        selection={"default": "opencode"},
    )
    gateway.extra_env |= {"ANTHROPIC_API_KEY": PROVIDER_SECRET, "AWS_SECRET_ACCESS_KEY": AWS_SECRET}
    gateway.start()
    with gateway.client() as client:
        assert follow_one_turn(client, gateway)[-1]["type"] == "turn.completed"
    [start] = [entry for entry in map(json.loads, log.read_text().splitlines()) if "env" in entry]
    assert start["env"]["ANTHROPIC_API_KEY"] == PROVIDER_SECRET  # what its provider needs
    assert "AWS_SECRET_ACCESS_KEY" not in start["env"]  # another provider's credential


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


def test_t22_a_problem_document_that_would_quote_a_secret_shows_it_masked(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    # A 404 names what was asked for: asked for by a key (or its base64), it must not
    # show it back.
    gateway = make_fake_gateway(claude_code={"env": {"ANTHROPIC_API_KEY": PROVIDER_SECRET}})
    gateway.start()
    encoded = base64.urlsafe_b64encode(b"k=" + PROVIDER_SECRET.encode()).decode()
    with gateway.client() as client:
        for name in (PROVIDER_SECRET, encoded):
            response = client.get(f"/v1/providers/{name}")
            body = assert_problem(response, 404)
            assert "[redacted]" in body["detail"]
            assert int(response.headers["content-length"]) == len(response.content)
            assert PROVIDER_SECRET not in response.text
            assert encoded[4:-4] not in response.text
    # The HTTP answer that refuses a WebSocket upgrade is a problem document too.
    url = f"{gateway.ws_url}/v1/sessions/{PROVIDER_SECRET}/ws?access_token={TOKEN}"
    refused = ws_refusal(url, {}).response
    assert refused.status_code == 404
    assert refused.body is not None
    assert b"[redacted]" in refused.body
    assert PROVIDER_SECRET.encode() not in refused.body
