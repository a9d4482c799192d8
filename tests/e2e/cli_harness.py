"""Driving the real CLIs through a real gateway process, and looking at the processes and
sockets under it: the harness of the tests of the CLIs as an attack surface
(test_hostile_workspaces.py, test_cli_exposure.py)."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from app.providers.catalog import CATALOG
from tests.e2e import providers
from tests.e2e.test_contract import descendants
from tests.gateway import GatewayProcess, SseReader, is_turn_end
from tests.stub_llm import StubLLM

PROVIDERS = list(providers.CONFIGS)
"""Every provider with its stub wiring in providers.py (test_contract.py checks that each one
of the catalog has it)."""
CLI_NAMES = {name: CATALOG[name].command for name in PROVIDERS}
"""What each provider's CLI process has in its command line (``claude``, ``gemini``, …)."""
SSE = {"Accept": "text/event-stream"}
ANSWERS = {
    "deny": {"decision": "deny", "message": "not in this test"},
    "allow": {"decision": "allow"},
}
"""The answers ``run_turn`` gives an approval."""


# --- driving the gateway ---------------------------------------------------------------------


def create_session(client: httpx.Client, workspace: Path, **body: Any) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(workspace), **body})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def run_turn(
    client: httpx.Client,
    session_id: str,
    prompt: str,
    *,
    on_first_delta: Callable[[], None] | None = None,
    decision: Literal["allow", "deny"] = "deny",
) -> list[dict[str, Any]]:
    """Run one turn, answering every approval it asks for with ``decision``; return its events.

    ``on_first_delta`` runs once, while the turn is streaming its first text.
    """
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    headers = {**SSE, "Last-Event-ID": str(after)}
    seen: list[dict[str, Any]] = []
    with client.stream("GET", f"/v1/sessions/{session_id}/events", headers=headers) as response:
        assert response.status_code == 200
        reader = SseReader(response)
        started = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
        assert started.status_code == 202, started.text
        for message in reader:
            envelope = message.json()
            seen.append(envelope)
            if envelope["type"] == "approval.requested":
                approval_id = envelope["data"]["approval_id"]
                answer = client.post(
                    f"/v1/sessions/{session_id}/approvals/{approval_id}",
                    json=ANSWERS[decision],
                )
                assert answer.status_code == 200, answer.text
            elif envelope["type"] == "message.delta" and on_first_delta is not None:
                on_first_delta()
                on_first_delta = None
            if is_turn_end(envelope):
                return seen
    raise AssertionError(f"the stream ended mid-turn: {[e['type'] for e in seen]}")


def stored_events(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    """Every event of the session's log, page after page."""
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.get(
            f"/v1/sessions/{session_id}/events", params={"after": after, "limit": 1000}
        )
        assert page.status_code == 200, f"{page.status_code} {page.text}"
        body = page.json()
        found += body["events"]
        if not body["events"] or body["next_after"] >= body["last_seq"]:
            return found
        after = body["next_after"]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def model_request_text(stub: StubLLM) -> str:
    """Everything every model request carried, as one string."""
    return "\n".join(request.raw_body.decode(errors="replace") for request in stub.requests)


def offered_tools(stub: StubLLM) -> set[str]:
    names: set[str] = set()
    for request in stub.model_requests():
        tools = request.body.get("tools", []) if isinstance(request.body, dict) else []
        for tool in tools:
            if isinstance(tool, dict):
                function = tool.get("function")
                name = function.get("name") if isinstance(function, dict) else tool.get("name")
                if isinstance(name, str):
                    names.add(name)
    return names


def marks(markers: Path) -> list[str]:
    return sorted(path.name for path in markers.iterdir())


def wait_for_marks(markers: Path, expected: set[str], timeout: float = 20.0) -> list[str]:
    """The markers once all of ``expected`` exist (or whatever exists at the deadline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if expected <= set(marks(markers)):
            break
        time.sleep(0.1)  # waiting for files another process creates; bounded by the deadline
    return marks(markers)


# --- processes and sockets under the gateway --------------------------------------------------


def gateway_children(gateway: GatewayProcess) -> set[int]:
    assert gateway.process is not None
    return descendants(gateway.process.pid)


def read_proc(pid: int, name: str) -> list[str]:
    """``/proc/<pid>/<name>`` split on NUL (cmdline, environ); empty if the process is gone."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as handle:
            return [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return []


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    # IPv6: four 32-bit words, each in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def listeners(pids: set[int]) -> set[tuple[str, str, int | str]]:
    """Listening sockets held by ``pids``: ``(tcp|tcp6|unix, address, port | path)``.

    Socket inodes come from ``/proc/<pid>/fd``; their state from ``/proc/net/{tcp,tcp6,unix}``
    (TCP state 0A is LISTEN; a unix socket with ``__SO_ACCEPTCON`` (flag 0x10000) listens).
    """
    inodes: set[int] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    found: set[tuple[str, str, int | str]] = set()
    for proto in ("tcp", "tcp6"):
        with open(f"/proc/net/{proto}") as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                host, port = fields[1].split(":")
                if fields[3] == "0A" and int(fields[9]) in inodes:
                    found.add((proto, _address(host), int(port, 16)))
    with open("/proc/net/unix") as handle:
        for line in handle.readlines()[1:]:
            fields = line.split()
            if int(fields[3], 16) & 0x10000 and int(fields[6]) in inodes:
                found.add(("unix", "", fields[7] if len(fields) > 7 else "(unnamed)"))
    return found


def assert_private_socket(path: Path) -> None:
    """A unix socket only its owner can connect to: 0600 or stricter, in a 0700 directory."""
    info = path.stat()
    assert info.st_uid == os.geteuid(), path
    assert info.st_mode & 0o077 == 0, oct(info.st_mode)
    parent = path.parent.stat()
    assert parent.st_uid == os.geteuid(), path.parent
    assert parent.st_mode & 0o077 == 0, oct(parent.st_mode)


@dataclass
class Shared:
    """One stub and one gateway per provider for the whole module (CLI starts are the cost)."""

    stub: StubLLM
    root: Path
    _gateways: dict[str, GatewayProcess] = field(default_factory=dict)

    @property
    def roots(self) -> Path:
        return self.root / "roots"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def markers(self) -> Path:
        """Where hostile hooks leave their marks: outside every workspace, and writable in
        the agents' sandbox, so a mark that never appears was never made."""
        return self.root / "markers"

    def workspace(self, name: str) -> Path:
        path = self.roots / name
        path.mkdir()
        return path

    def gateway(self, provider: str) -> GatewayProcess:
        """The module's gateway with ``provider`` as its only provider (started on first use)."""
        if provider not in self._gateways:
            sections: dict[str, Any] = {name: {"enabled": False} for name in providers.CONFIGS}
            sections[provider] = providers.CONFIGS[provider](self.stub, self.home)
            config = {
                "workspaces": {"roots": [str(self.roots)]},
                "sessions": {"approval_timeout_s": 120},
                "selection": {"default": provider},
                "providers": sections,
                "sandbox": {"read_write": [str(self.markers)]},
            }
            gateway = GatewayProcess(data_dir=self.root / f"data-{provider}", config=config)
            self._gateways[provider] = gateway.start()
        self.stub.clear()  # each test looks only at its own model requests
        return self._gateways[provider]

    def stop(self) -> None:
        for gateway in self._gateways.values():
            gateway.stop()


@contextlib.contextmanager
def shared_gateways(root: Path) -> Iterator[Shared]:
    """A stub and the (lazily started) gateways under ``root``, stopped at the end."""
    (root / "roots").mkdir()
    (root / "home").mkdir()
    (root / "markers").mkdir()
    with StubLLM() as stub:
        state = Shared(stub=stub, root=root)
        try:
            yield state
        finally:
            state.stop()
