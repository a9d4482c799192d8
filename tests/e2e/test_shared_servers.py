"""Codex and OpenCode serve sessions from servers that survive being lost.

With the sandbox off (``sandbox.mode = "none"``) one server serves every session of the
provider; with it on (``bwrap``) each session has a server of its own, in its own sandbox, that
sees its workspace and not another session's.

The memory test also writes the measured resident memory of the CLI processes behind ten
sessions per provider to ``test-artifacts/rss-<provider>[-shared].json`` (reported in
docs/concepts/providers.md).
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
from tests.e2e.test_contract import create_session, descendants, run_turn
from tests.gateway import ROOT, follow, wait_until
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


MODES = [
    ("claude_code", "bwrap"),
    ("codex", "bwrap"),
    ("opencode", "bwrap"),
    ("codex", "none"),
    ("opencode", "none"),
]
"""Codex and OpenCode share one server only with the sandbox off."""


@pytest.mark.parametrize(("provider", "mode"), MODES)
def test_ten_sessions_and_the_processes_that_serve_them(
    provider: str, mode: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(provider, sandbox={"mode": mode}).start()
    assert gateway.process is not None
    with gateway.client() as client:
        ids = run_concurrent_turns(client, workspace, "Say hello")
        pids = {client.get(f"/v1/sessions/{sid}").json()["process"]["pid"] for sid in ids}
        shared = client.get(f"/v1/providers/{provider}").json()["capabilities"]["shared_process"]
    children = descendants(gateway.process.pid)
    assert shared is (provider != "claude_code" and mode == "none")
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
    (ARTIFACTS / f"rss-{provider}{'-shared' if shared else ''}.json").write_text(
        json.dumps(
            {
                "provider": provider,
                "sandbox": mode,
                "sessions": SESSIONS,
                "processes": len(tree),
                "total_rss_mib": round(total / 1024, 1),
            }
        )
    )


@pytest.mark.parametrize("mode", ["bwrap", "none"])
@pytest.mark.parametrize("provider", ["codex", "opencode"])
def test_a_killed_server_is_restarted_and_every_thread_continues(
    provider: str, mode: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway(provider, sandbox={"mode": mode}).start()
    with gateway.client() as client:
        ids = []
        for n in range(3):
            sid = client.post("/v1/sessions", json={"workspace": str(workspace)}).json()["id"]
            assert run_turn(client, sid, f"Remember the word ember{n}")[-1]["type"] == (
                "turn.completed"
            )
            ids.append(sid)
        pids = {sid: client.get(f"/v1/sessions/{sid}").json()["process"]["pid"] for sid in ids}
        threads = {sid: client.get(f"/v1/sessions/{sid}").json()["thread_id"] for sid in ids}
        server = pids[ids[0]]
        if mode == "none":
            assert set(pids.values()) == {server}  # one shared server
        else:
            assert len(set(pids.values())) == len(ids)  # one server per session
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
            if mode == "bwrap" and n > 0:
                assert session["process"]["pid"] == pids[sid]  # another's loss is not its own


@pytest.mark.parametrize("provider", ["codex", "opencode"])
def test_sandboxed_sessions_run_in_servers_of_their_own_that_cannot_see_each_other(
    provider: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    # allow_all: the commands run as the server runs them, not in a sandbox of Codex's own.
    gateway = make_gateway(
        provider,
        sandbox={"mode": "bwrap"},
        sessions={"allowed_approval_modes": ["ask", "allow_all"]},
    ).start()
    assert gateway.process is not None
    other = workspace.parent / "other"
    other.mkdir()
    (workspace / "mine.txt").write_text("first-secret\n")
    (other / "mine.txt").write_text("second-secret\n")
    with gateway.client() as client:
        sessions = {
            place: create_session(client, place, approval_mode="allow_all")["id"]
            for place in (workspace, other)
        }
        pids = {}
        for place, sid in sessions.items():
            elsewhere = other if place == workspace else workspace
            events = run_turn(
                client,
                sid,
                f"[[tool:bash cat {place}/mine.txt; cat {elsewhere}/mine.txt; echo done]]",
            )
            assert events[-1]["type"] == "turn.completed", events[-1]
            said = events[-1]["data"]["final_text"]
            own, theirs = (
                ("first-secret", "second-secret")
                if place == workspace
                else ("second-secret", "first-secret")
            )
            assert own in said, said
            assert "done" in said, said
            assert theirs not in said, said
            assert "No such file or directory" in said, said
            pids[sid] = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
        assert len(set(pids.values())) == 2  # a server each
        # From outside too: every process of a session's server sees its own workspace (in
        # its mount namespace, /proc/<pid>/root) and not the other's.
        for place, sid in sessions.items():
            elsewhere = other if place == workspace else workspace
            inside = descendants(pids[sid])  # bwrap's sandboxed child and the CLI below it
            assert inside, "the server runs no process inside its sandbox"
            for pid in inside:
                root = Path(f"/proc/{pid}/root")
                assert (root / str(place).lstrip("/") / "mine.txt").exists(), pid
                assert not (root / str(elsewhere).lstrip("/")).exists(), pid
        assert set(pids.values()) <= descendants(gateway.process.pid)


@pytest.mark.parametrize("provider", ["codex", "opencode"])
def test_an_idle_sandboxed_server_is_closed_and_the_next_turn_resumes_its_thread(
    provider: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    overrides: dict[str, Any] = {provider: {"idle_timeout_s": 1}}
    gateway = make_gateway(provider, sandbox={"mode": "bwrap"}, **overrides).start()
    assert gateway.process is not None
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        assert run_turn(client, sid, "Remember the word cinder")[-1]["type"] == "turn.completed"
        first = client.get(f"/v1/sessions/{sid}").json()
        server = first["process"]["pid"]

        def closed() -> bool:
            return client.get(f"/v1/sessions/{sid}").json()["process"] is None

        wait_until(closed, timeout=30, what="the idle server closed")
        root = gateway.process.pid
        wait_until(lambda: server not in descendants(root), timeout=10, what="its process gone")
        before = len(stub.requests)
        events = run_turn(client, sid, "What was the word?")
        assert events[-1]["type"] == "turn.completed", events[-1]
        assert "cinder" in json.dumps([r.body for r in stub.requests[before:]])
        again = client.get(f"/v1/sessions/{sid}").json()
        assert again["thread_id"] == first["thread_id"]
        assert again["process"]["pid"] != server
