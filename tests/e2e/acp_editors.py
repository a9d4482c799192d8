"""Editors in front of the gateway, for tests/e2e/test_acp_editors.py.

- ``Acpx``: the headless ACP client ``acpx`` (pinned in agents/package.json), run as a user
  runs it, with the gateway's relay ``agent-gateway-acp`` as its agent command: acpx starts
  the relay as a child process and speaks ACP to it on stdio, the relay to ``/v1/acp``.
  ``--format json`` makes acpx print every JSON-RPC message of the conversation, one a line,
  which is what the tests read. acpx has no telemetry and no update check (its 0.19.1
  sources open no connection but to the agent it starts); its state, the queue owner that
  keeps a session's agent running between prompts and the sockets it listens on live under
  its ``HOME``, a directory of the test's own.
- ``CutProxy``: a loopback TCP forwarder in front of the gateway whose connections a test
  cuts at once (no WebSocket close, as a network that drops).
- ``EditorGateways``: one stub model server and one gateway per provider for a whole module
  (CLI and gateway starts are the cost), each gateway with that provider alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.process import proctree
from app.providers.acp.provider import PINNED_NODE22
from app.settings import PINNED_MODULES
from tests.e2e import providers
from tests.gateway import TOKEN, GatewayProcess, wait_until
from tests.integration.relayproc import relay_env
from tests.stub_llm import StubLLM

ACPX = PINNED_MODULES / "acpx" / "dist" / "cli.js"
"""acpx's entry point; run with the pinned Node.js 22 (acpx needs 22.13 or newer)."""
WIRING: dict[str, Callable[[StubLLM, Path], dict[str, Any]]] = {
    **providers.CONFIGS,
    "acp:claude": providers.acp_claude,
}
"""How each provider the editor tests drive is pointed at the stub."""
TURN_TIMEOUT_S = 90.0


def require_acpx() -> None:
    """Fail with what to do when acpx or the Node.js it needs is not installed."""
    missing = [str(path) for path in (ACPX, PINNED_NODE22) if not path.exists()]
    if missing:
        raise AssertionError(f"{missing} missing from agents/node_modules: run `make setup`")


# --- acpx ------------------------------------------------------------------------------------


@dataclass
class Transcript:
    """What acpx printed with ``--format json``: JSON-RPC messages (both ways) and acpx's
    own result objects, in order."""

    messages: list[dict[str, Any]]
    returncode: int | None = None
    stderr: str = ""

    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The ``update`` of every ``session/update`` (of ``kind``, if given)."""
        found = [
            m["params"]["update"] for m in self.messages if m.get("method") == "session/update"
        ]
        return [u for u in found if kind is None or u["sessionUpdate"] == kind]

    def text(self) -> str:
        return "".join(u["content"]["text"] for u in self.updates("agent_message_chunk"))

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("method") == method]

    def answer_to(self, request: dict[str, Any]) -> dict[str, Any]:
        """The response to ``request``: the next message with its id and no method (each
        side numbers its own requests, so an id alone may be the other side's)."""
        after = self.messages[self.messages.index(request) + 1 :]
        return next(m for m in after if m.get("id") == request["id"] and "method" not in m)

    def stop_reason(self) -> str:
        """The ``stopReason`` of the ``session/prompt`` response."""
        (result,) = [
            m["result"]
            for m in self.messages
            if isinstance(m.get("result"), dict) and "stopReason" in m["result"]
        ]
        return str(result["stopReason"])

    def action(self, name: str) -> dict[str, Any]:
        """acpx's own result object ``{"action": name, …}``."""
        (found,) = [m for m in self.messages if m.get("action") == name]
        return found


def _parse(lines: list[str]) -> list[dict[str, Any]]:
    messages = []
    for line in lines:
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                messages.append(value)
    return messages


class Running:
    """An acpx command running in the background, its output read as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(process.stdout, self._lines), daemon=True),
            threading.Thread(target=self._read, args=(process.stderr, self._stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            with self._changed:
                into.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def transcript(self) -> Transcript:
        with self._changed:
            return Transcript(_parse(list(self._lines)), self.process.poll(), "".join(self._stderr))

    def wait_for(self, condition: Callable[[Transcript], Any], timeout: float = 30.0) -> Any:
        """Until ``condition`` holds for the output so far, woken by each line."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                seen = Transcript(_parse(list(self._lines)), self.process.poll())
                if result := condition(seen):
                    return result
                left = deadline - time.monotonic()
                if left <= 0 or (seen.returncode is not None and not self._alive()):
                    raise AssertionError(
                        f"acpx's output never met {condition}: {self._lines[-5:]}"
                        f"{''.join(self._stderr)[-2000:]}"
                    )
                self._changed.wait(left)

    def _alive(self) -> bool:
        return any(reader.is_alive() for reader in self._readers)

    def finish(self, timeout: float = TURN_TIMEOUT_S) -> Transcript:
        """Its output once it has ended."""
        self.process.wait(timeout=timeout)
        self.close()
        return self.transcript()

    def close(self) -> None:
        """Its output read to the end and its pipes closed (it has ended, or was killed)."""
        for reader in self._readers:
            reader.join(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@dataclass
class Acpx:
    """acpx in ``cwd`` with the relay to ``gateway_url`` as its agent."""

    home: Path
    cwd: Path
    gateway_url: str
    relay_log: Path
    started: list[Running] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = relay_env(TOKEN, HOME=str(self.home))
        env["PATH"] = f"{PINNED_NODE22.parent}{os.pathsep}{env.get('PATH', os.defpath)}"
        return env

    def argv(self, *args: str) -> list[str]:
        # acpx splits --agent on spaces: none of these paths has one (tmp_path, the venv).
        relay = (
            f"{sys.executable} -m agent_gateway_acp --url {self.gateway_url} "
            f"--log-file {self.relay_log} --log-level debug"
        )
        return [
            str(PINNED_NODE22),
            str(ACPX),
            "--agent",
            relay,
            "--cwd",
            str(self.cwd),
            "--format",
            "json",
            "--approve-all",  # acpx answers every permission request with its allow_once
            "--timeout",
            str(int(TURN_TIMEOUT_S)),
            "--ttl",
            "60",  # its queue owner never outlives a failed test by long
            *args,
        ]

    def run(self, *args: str, timeout: float = TURN_TIMEOUT_S) -> Transcript:
        """Run ``acpx <args>`` to its end; it must succeed."""
        done = subprocess.run(
            self.argv(*args),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,  # the assertion below says what acpx printed
        )
        seen = Transcript(_parse(done.stdout.splitlines()), done.returncode, done.stderr)
        assert done.returncode == 0, (
            f"acpx {args}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        return seen

    def start(self, *args: str) -> Running:
        process = subprocess.Popen(
            self.argv(*args),
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        running = Running(process)
        self.started.append(running)
        return running

    def processes(self) -> dict[int, str]:
        """Live processes running with this acpx's ``HOME``: acpx, its queue owner, the
        relay (what the relay or the gateway start get another environment)."""
        table = proctree.snapshot()
        found = proctree.tagged(table, "HOME", lambda home: home == str(self.home))
        return {pid: _command_line(pid) for pid in found if pid != os.getpid()}

    def stop_all(self) -> dict[int, str]:
        """What of this acpx is still running after a short grace, killed; empty if none."""
        for running in self.started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                running.process.wait(timeout=10)
        with contextlib.suppress(AssertionError):
            wait_until(lambda: not self.processes(), timeout=10, what="acpx to exit")
        left = self.processes()
        table = proctree.snapshot()
        for pid in left:
            if pid in table:
                proctree.signal_verified(pid, table[pid].starttime)
        for running in self.started:
            running.process.wait(timeout=10)
            running.close()
        return left


def _command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "(gone)"
    return raw.replace(b"\0", b" ").decode(errors="replace")[:200]


# --- a connection that can be cut -----------------------------------------------------------


class CutProxy:
    """Forwards loopback TCP connections to ``port``; ``cut()`` drops the open ones at once
    (a reset, no close handshake) and keeps accepting new ones."""

    def __init__(self, port: int) -> None:
        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self._target))
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                # A reset at close (SO_LINGER 0), as a dropped network looks; the shutdown
                # first wakes the pump blocked reading it (a close alone would not).
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the acceptor (a close would not)
        self._listener.close()
        self.cut()
        self._acceptor.join(timeout=5)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


# --- the gateways ---------------------------------------------------------------------------


@dataclass
class EditorGateways:
    """One stub and one gateway per provider for the whole module."""

    stub: StubLLM
    root: Path
    _gateways: dict[str, GatewayProcess] = field(default_factory=dict)
    _workspaces: int = 0

    def gateway(self, provider: str) -> GatewayProcess:
        """The gateway whose one provider is ``provider`` (started on first use)."""
        if provider not in self._gateways:
            sections: dict[str, Any] = {name: {"enabled": False} for name in providers.CONFIGS}
            sections[provider] = WIRING[provider](self.stub, self.root / "home")
            config = {
                "workspaces": {"roots": [str(self.root / "roots")]},
                "sessions": {"approval_timeout_s": 120},
                "selection": {"default": provider},
                "providers": sections,
            }
            data = self.root / f"data-{provider.replace(':', '-')}"
            self._gateways[provider] = GatewayProcess(data_dir=data, config=config).start()
        return self._gateways[provider]

    def workspace(self) -> Path:
        self._workspaces += 1
        path = self.root / "roots" / f"project-{self._workspaces}"
        path.mkdir()
        return path

    def stop(self) -> None:
        for gateway in self._gateways.values():
            gateway.stop()


@contextlib.contextmanager
def editor_gateways(root: Path) -> Iterator[EditorGateways]:
    (root / "roots").mkdir()
    (root / "home").mkdir()
    with StubLLM() as stub:
        state = EditorGateways(stub=stub, root=root)
        try:
            yield state
        finally:
            state.stop()
