"""Codex and OpenCode serve every session from one CLI process, and survive losing it.

The memory test also writes the measured resident memory of the CLI processes behind ten
sessions per provider to ``test-artifacts/rss-<provider>.json`` (reported in README.md).
"""

from __future__ import annotations

import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import descendants, run_turn
from tests.gateway import ROOT, follow
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

SESSIONS = 10
ARTIFACTS = ROOT / "test-artifacts"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run_concurrent_turns(client: httpx.Client, workspace: Path, prompt: str) -> list[str]:
    """Create the sessions, start every turn at once, and wait for each to complete."""
    sessions = []
    for _ in range(SESSIONS):
        created = client.post("/v1/sessions", json={"workspace": str(workspace)})
        assert created.status_code == 201, created.text
        sessions.append(created.json())
    for session in sessions:
        started = client.post(f"/v1/sessions/{session['id']}/turns", json={"prompt": prompt})
        assert started.status_code == 202, started.text

    def finish(session: dict[str, Any]) -> dict[str, Any]:
        return follow(client, session["id"], after=session["last_seq"])[-1]

    with ThreadPoolExecutor(SESSIONS) as pool:
        ends = list(pool.map(finish, sessions))
    assert [e["type"] for e in ends] == ["turn.completed"] * SESSIONS, ends
    return [s["id"] for s in sessions]


@pytest.mark.parametrize("provider", ["claude_code", "codex", "opencode"])
def test_ten_sessions_and_the_processes_that_serve_them(
    provider: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(provider).start()
    assert gateway.process is not None
    with gateway.client() as client:
        ids = run_concurrent_turns(client, workspace, "Say hello")
        pids = {client.get(f"/v1/sessions/{sid}").json()["process"]["pid"] for sid in ids}
        shared = client.get(f"/v1/providers/{provider}").json()["capabilities"]["shared_process"]
    children = descendants(gateway.process.pid)
    if shared:
        assert len(pids) == 1  # one CLI process serves all ten sessions
    else:
        assert len(pids) == SESSIONS
    assert pids <= children
    tree = set()
    for pid in pids:
        tree |= {pid} | descendants(pid)
    total = sum(rss_kib(pid) for pid in tree)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"rss-{provider}.json").write_text(
        json.dumps(
            {
                "provider": provider,
                "sessions": SESSIONS,
                "processes": len(tree),
                "total_rss_mib": round(total / 1024, 1),
            }
        )
    )


@pytest.mark.parametrize("provider", ["codex", "opencode"])
def test_a_killed_shared_server_is_restarted_and_every_thread_continues(
    provider: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway(provider).start()
    with gateway.client() as client:
        ids = []
        for n in range(3):
            sid = client.post("/v1/sessions", json={"workspace": str(workspace)}).json()["id"]
            assert run_turn(client, sid, f"Remember the word ember{n}")[-1]["type"] == (
                "turn.completed"
            )
            ids.append(sid)
        server = client.get(f"/v1/sessions/{ids[0]}").json()["process"]["pid"]
        threads = {sid: client.get(f"/v1/sessions/{sid}").json()["thread_id"] for sid in ids}
        os.kill(server, signal.SIGKILL)
        for n, sid in enumerate(ids):
            before = len(stub.requests)
            events = run_turn(client, sid, "What was the word?")
            assert events[-1]["type"] == "turn.completed", events[-1]
            sent = json.dumps([r.body for r in stub.requests[before:]])
            assert f"ember{n}" in sent  # the thread's history went with the new request
            session = client.get(f"/v1/sessions/{sid}").json()
            assert session["thread_id"] == threads[sid]
            assert session["process"]["pid"] != server
