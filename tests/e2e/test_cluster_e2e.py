"""Two replicas with a real CLI (Claude Code, Codex, OpenCode) on the stub model, one private
PostgreSQL and one private Redis: a session created on A runs its turns wherever they land, an
approval answered on B reaches the replica that asked, when the owner is SIGKILLed mid-stream
the survivor ends the turn once (``replica_lost``) and resumes the same thread on the next
turn, and with Redis stopped the survivor goes on running the session it holds.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.providers.catalog import present_by_default
from tests.dbservers import PostgresServer, RedisServer
from tests.e2e.providers import CONFIGS
from tests.gateway import CLUSTER_SECRET, GatewayProcess, SseReader, is_turn_end
from tests.stub_llm import StubLLM

LEASE_TTL_S = 3.0


PROVIDERS = ["claude_code", "codex", "opencode"]


@pytest.fixture(params=PROVIDERS)
def replicas(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    stub: StubLLM,
    workspace: Path,
    postgres: PostgresServer,
    redis_server: RedisServer,
) -> Iterator[list[GatewayProcess]]:
    """Replicas gw-a and gw-b (started) of one provider, sharing the database, Redis, the
    workspace and the CLI's state (its home, as a shared volume would). Codex and OpenCode run
    a shared server per replica, so their threads resume on another replica's server."""
    redis_server.command("FLUSHALL")
    url = postgres.create_database(f"e2e_{request.param}_{tmp_path.name[-12:].lower()}")
    home = tmp_path / "home"
    home.mkdir()
    made = []
    for name in ("gw-a", "gw-b"):
        providers: dict[str, Any] = {p: {"enabled": False} for p in present_by_default()}
        providers[request.param] = CONFIGS[request.param](stub, home)
        config: dict[str, Any] = {
            "workspaces": {"roots": [str(workspace.parent)]},
            "sessions": {"approval_timeout_s": 120},
            "selection": {"default": request.param},
            "providers": providers,
            "storage": {"url": url},
            # The sessions' CLI homes and workspace records, shared like the threads in them.
            "sandbox": {"homes_dir": str(home / "sessions")},
            "snapshots": {"dir": str(home / "snapshots")},
            "cluster": {
                "redis_url": redis_server.url,
                "replica_id": name,
                "lease_ttl_s": LEASE_TTL_S,
                "secret": CLUSTER_SECRET,
            },
        }
        made.append(GatewayProcess(data_dir=tmp_path / name, config=config))
    try:
        yield [gateway.start() for gateway in made]
    finally:
        for gateway in made:
            gateway.stop()


@contextlib.contextmanager
def events(client: httpx.Client, sid: str, *, after: int) -> Iterator[SseReader]:
    """The session's SSE stream from ``after`` (``Last-Event-ID``), on this client's replica."""
    headers = {"Accept": "text/event-stream", "Last-Event-ID": str(after)}
    with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
        yield SseReader(response)


def read_until(reader: SseReader, stop: Any) -> list[dict[str, Any]]:
    seen = []
    for frame in reader:
        if frame.event is not None:
            continue
        seen.append(frame.json())
        if stop(seen[-1]):
            return seen
    raise AssertionError(f"the stream ended after {seen[-1:]}")


def stored(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    page = client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000})
    assert page.status_code == 200, page.text
    events: list[dict[str, Any]] = page.json()["events"]
    return events


def test_a_session_moves_between_replicas_with_the_real_cli(
    replicas: list[GatewayProcess], workspace: Path, redis_server: RedisServer
) -> None:
    a, b = replicas
    with a.client() as on_a, b.client() as on_b:
        created = on_a.post("/v1/sessions", json={"workspace": str(workspace)})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        # A turn asking for a tool, started on A; its approval answered on B.
        assert (
            on_a.post(
                f"/v1/sessions/{sid}/turns", json={"prompt": "[[tool:bash touch ok.txt]]"}
            ).status_code
            == 202
        )
        with events(on_b, sid, after=0) as reader:
            asked = read_until(reader, lambda e: e["type"] == "approval.requested")
            approval_id = asked[-1]["data"]["approval_id"]
            allowed = on_b.post(
                f"/v1/sessions/{sid}/approvals/{approval_id}", json={"decision": "allow"}
            )
            assert allowed.status_code == 200, allowed.text
            first = asked + read_until(reader, is_turn_end)
        assert first[-1]["type"] == "turn.completed"
        assert (workspace / "ok.txt").exists()
        assert on_b.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-a"
        thread = on_b.get(f"/v1/sessions/{sid}").json()["thread_id"]

        # A slow turn started on B runs on A; A is SIGKILLed mid-stream.
        assert (
            on_b.post(f"/v1/sessions/{sid}/turns", json={"prompt": "[[slow:30]]"}).status_code
            == 202
        )
        with events(on_b, sid, after=first[-1]["seq"]) as reader:
            live = read_until(reader, lambda e: e["type"] == "message.delta")
            assert a.process is not None
            a.process.send_signal(signal.SIGKILL)
            a.process.wait(timeout=10)
            live += read_until(reader, is_turn_end)
        assert live[-1]["type"] == "turn.failed"
        assert live[-1]["data"]["error"]["reason"] == "replica_lost"
        everything = stored(on_b, sid)
        assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
        assert [e["type"] for e in everything].count("turn.failed") == 1
        assert everything[len(first) :] == live

        # The next turn, on B, resumes the thread the killed replica ran.
        assert (
            on_b.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hello again"}).status_code
            == 202
        )
        with events(on_b, sid, after=everything[-1]["seq"]) as reader:
            last = read_until(reader, is_turn_end)
        assert last[-1]["type"] == "turn.completed"
        session = on_b.get(f"/v1/sessions/{sid}").json()
        assert session["thread_id"] == thread
        assert session["owner"] == "gw-b"

        # Redis stops mid-session: B goes on running the session it holds, and storing it.
        redis_server.stop()
        try:
            started = on_b.post(f"/v1/sessions/{sid}/turns", json={"prompt": "still there?"})
            assert started.status_code == 202, started.text
            with events(on_b, sid, after=last[-1]["seq"]) as reader:
                offline = read_until(reader, is_turn_end)
            assert offline[-1]["type"] == "turn.completed"
        finally:
            redis_server.start()
        everything = stored(on_b, sid)
        assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
        assert everything[-len(offline) :] == offline
