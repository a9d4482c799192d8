"""``agent-gateway-acp`` run the way an editor runs it: a child process whose stdin and stdout
carry ACP, one JSON-RPC message a line. ``Editor`` is that editor, at the level of lines."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RELAY_SOURCE = ROOT / "clients" / "acp"
TIMEOUT_S = 15.0
_PROXIES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


def relay_env(token: str | None, **extra: str) -> dict[str, str]:
    """The test run's environment for a relay: its package from this tree, ``token`` as the
    key, no proxy (loopback only)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name.lower() not in _PROXIES and name not in ("AGENT_GATEWAY_URL", "AGENT_GATEWAY_TOKEN")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(RELAY_SOURCE), str(ROOT)])
    if token is not None:
        env["AGENT_GATEWAY_TOKEN"] = token
    return {**env, **extra}


class Editor:
    """The relay's stdio, as an editor sees it: its stdin to write, its stdout to read; its
    process, when the relay runs in one."""

    def __init__(
        self,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        process: asyncio.subprocess.Process | None = None,
    ) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._process = process
        self.received: list[dict[str, Any]] = []
        self.not_json: list[bytes] = []
        self.stderr = bytearray()
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._tasks = [asyncio.create_task(self._read_stdout())]
        if process is not None:
            self._tasks.append(asyncio.create_task(self._read_stderr()))

    @classmethod
    async def start(
        cls, *args: str, env: Mapping[str, str], module: str = "agent_gateway_acp"
    ) -> Editor:
        """The relay in a child process, as editors run it."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
        )
        assert process.stdin is not None
        assert process.stdout is not None
        return cls(process.stdin, process.stdout, process)

    @property
    def process(self) -> asyncio.subprocess.Process:
        assert self._process is not None
        return self._process

    async def _read_stdout(self) -> None:
        while line := await self._stdout.readline():
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict):
                self.received.append(message)
            else:
                self.not_json.append(line)
            self._touch()
        self._touch()

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(4096):
            self.stderr += chunk
            self._touch()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], Any]) -> Any:
        async with asyncio.timeout(TIMEOUT_S):
            while not (value := predicate()):
                await self._changed.wait()
            return value

    # --- speaking -----------------------------------------------------------------------

    async def write(self, line: str) -> None:
        self._stdin.write(line.encode() + b"\n")
        await self._stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.write(json.dumps({"jsonrpc": "2.0", **message}))

    async def request(self, method: str, params: dict[str, Any]) -> int:
        id = next(self._ids)
        await self.send({"id": id, "method": method, "params": params})
        return id

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request and its answer (result or error)."""
        return await self.response(await self.request(method, params))

    async def response(self, id: Any) -> dict[str, Any]:
        answer: dict[str, Any] = await self.wait_for(lambda: self.answer_to(id))
        return answer

    def answer_to(self, id: Any) -> dict[str, Any] | None:
        answers = [m for m in self.received if m.get("id") == id and "method" not in m]
        assert len(answers) <= 1, f"request {id} answered {len(answers)} times: {answers}"
        return answers[0] if answers else None

    def updates(self) -> list[str]:
        """The text of every agent message chunk received, in order."""
        return [
            m["params"]["update"]["content"]["text"]
            for m in self.received
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]

    def asked(self, method: str = "session/request_permission") -> list[dict[str, Any]]:
        return [m for m in self.received if m.get("method") == method and "id" in m]

    async def start_session(self, cwd: Path) -> str:
        initialized = await self.call("initialize", {"protocolVersion": 1})
        assert "result" in initialized, initialized
        created = await self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        return str(created["result"]["sessionId"])

    # --- ending -------------------------------------------------------------------------

    async def close_stdin(self) -> None:
        self._stdin.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await self._stdin.wait_closed()

    async def exit_status(self) -> int:
        async with asyncio.timeout(TIMEOUT_S):
            status = await self.process.wait()
            await asyncio.gather(*self._tasks)
        return status

    async def kill(self) -> None:
        """Teardown: the relay is gone, whatever the test did."""
        if self._process is not None:
            if self._process.returncode is None:
                self._process.kill()
            await self._process.wait()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
