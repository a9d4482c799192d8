"""Usage limits waited out, with the real CLIs: a turn whose agent hits a usage limit that
resets in a few seconds waits for the reset the CLI reported (``retry.scheduled`` with
``resume_at``, status ``retrying``) and continues in the same thread by itself, also when
the gateway is restarted during the wait.

The stub's ``[[usage_limit:<seconds>]]`` answers the way each API reports a subscription
limit; Claude Code reads it as one only with a claude.ai login (an OAuth token), as it does
for real users: with an API key the same 429 is a plain rate limit.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.providers import CONFIGS
from tests.e2e.test_contract import SSE, create_session, start_turn
from tests.gateway import GatewayProcess, SseReader, is_turn_end
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

RESET_S = 5
LIMITED = f"Summarize the plan [[usage_limit:{RESET_S}]]"


def subscription(stub: StubLLM, home: Path) -> dict[str, Any]:
    """Claude Code logged in to a claude.ai subscription (no API key), against the stub."""
    section = CONFIGS["claude_code"](stub, home)
    env = {k: v for k, v in section["env"].items() if k != "ANTHROPIC_API_KEY"}
    return {**section, "env": {**env, "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-stub"}}


def limited_gateway(
    provider: str, make_gateway: GatewayFactory, stub: StubLLM, tmp_path: Path
) -> GatewayProcess:
    overrides: dict[str, Any] = {"retry": {"usage_limit": "wait", "usage_limit_max_wait_s": 60}}
    if provider == "claude_code":
        overrides["claude_code"] = subscription(stub, tmp_path / "home")
    return make_gateway(provider, **overrides)


def events_after(client: httpx.Client, session_id: str, after: int) -> SseReader:
    """An SSE reader of the session's events after ``after`` (the caller closes it)."""
    headers = {**SSE, "Last-Event-ID": str(after)}
    request = client.build_request("GET", f"/v1/sessions/{session_id}/events", headers=headers)
    return SseReader(client.send(request, stream=True))


def check_scheduled(scheduled: dict[str, Any], started: datetime, seen: datetime) -> datetime:
    """The ``retry.scheduled`` of a usage limit: it resumes at the stub's reset (``RESET_S``
    after the refused request, which came between ``started`` and ``seen``) plus the one
    second the gateway waits past it; the CLI's start-up time, however long, is not in it."""
    data = scheduled["data"]
    assert (data["kind"], data["source"], data["attempt"]) == ("usage_limit", "gateway", 2)
    resume_at = datetime.fromisoformat(data["resume_at"])
    # Resets are given in whole seconds: one more second of rounding either way.
    earliest = started + timedelta(seconds=RESET_S - 1)
    latest = seen + timedelta(seconds=RESET_S + 2)
    assert earliest <= resume_at <= latest, (resume_at, started, seen)
    return resume_at


@contextlib.contextmanager
def limited_turn(
    client: httpx.Client, session: dict[str, Any]
) -> Iterator[tuple[SseReader, dict[str, Any], dict[str, Any], datetime]]:
    """Start the limited turn with a reader of the session's events open, read up to its
    ``retry.scheduled``: ``(reader, turn, scheduled, resume_at)``."""
    reader = events_after(client, session["id"], session["last_seq"])
    try:
        started = datetime.now().astimezone()
        turn = start_turn(client, session["id"], LIMITED)
        scheduled = reader.until(lambda e: e["type"] == "retry.scheduled")[-1]
        seen = datetime.now().astimezone()
        yield reader, turn, scheduled, check_scheduled(scheduled, started, seen)
    finally:
        reader.response.close()


def check_continued_in_thread(stub: StubLLM, requests_before: int) -> None:
    """The stub saw the refused request, then one after the reset carrying the same
    conversation (same thread: the original prompt goes along)."""
    sent = stub.model_requests()[requests_before:]
    assert len(sent) >= 2, [r.last_user_text for r in sent]
    assert LIMITED in json.dumps(sent[-1].body)


def test_a_usage_limit_is_waited_out_and_the_turn_continues_in_its_thread(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, tmp_path: Path
) -> None:
    """Codex; Claude Code's wait is the restart test's below (the same wait, plus a restart
    in the middle of it)."""
    gateway = limited_gateway("codex", make_gateway, stub, tmp_path).start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        before = len(stub.model_requests())
        with limited_turn(client, session) as (reader, turn, _, resume_at):
            waiting = client.get(f"/v1/sessions/{sid}/turns/{turn['id']}").json()
            assert waiting["status"] == "retrying"
            assert datetime.fromisoformat(waiting["resume_at"]) == resume_at
            assert client.get(f"/v1/sessions/{sid}").json()["status"] == "retrying"
            events = reader.until(is_turn_end)

        assert events[-1]["type"] == "turn.completed", events[-1]
        assert events[-1]["attempt"] == 2
        assert events[-1]["turn_id"] == turn["id"]
        assert "turn.failed" not in [e["type"] for e in events]
        assert datetime.fromisoformat(events[-1]["at"]) >= resume_at
        done = client.get(f"/v1/sessions/{sid}/turns/{turn['id']}").json()
        assert (done["status"], done["attempts"], done["resume_at"]) == ("completed", 2, None)
        check_continued_in_thread(stub, before)


def test_the_wait_for_a_reset_survives_a_gateway_restart(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, tmp_path: Path
) -> None:
    gateway = limited_gateway("claude_code", make_gateway, stub, tmp_path).start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        before = len(stub.model_requests())
        with limited_turn(client, session) as (_, turn, scheduled, resume_at):
            pass  # the turn waits for the reset
        thread = client.get(f"/v1/sessions/{sid}").json()["thread_id"]

    assert gateway.stop() == 0
    gateway.start()
    with gateway.client() as client:
        waiting = client.get(f"/v1/sessions/{sid}/turns/{turn['id']}").json()
        # Unless the restart took longer than the wait, the turn is still waiting.
        assert waiting["status"] in ("retrying", "running", "completed"), waiting
        reader = events_after(client, sid, scheduled["seq"])
        try:
            events = reader.until(is_turn_end)
        finally:
            reader.response.close()
        assert [e["type"] for e in events if e["type"].startswith("turn.")] == ["turn.completed"]
        assert events[-1]["turn_id"] == turn["id"]
        assert events[-1]["attempt"] == 2
        assert datetime.fromisoformat(events[-1]["at"]) >= resume_at
        assert client.get(f"/v1/sessions/{sid}").json()["thread_id"] == thread
    check_continued_in_thread(stub, before)
