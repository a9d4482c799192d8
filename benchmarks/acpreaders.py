"""ACP clients that timestamp every stamped delta they receive, as ``benchmarks/streams.py``'s
do for SSE and the session WebSocket: each is attached to one session for good and reads one
turn at a time (``expect(n)``, then ``turn()``).

- ``RawAcp``: ``/v1/acp`` on a raw asyncio socket (the upgrade, masked client frames, server
  frames parsed in place), the stamp found in the frame's bytes: what the gateway adds, with
  no client cost to speak of.
- ``SdkAcp``: the ACP Python SDK's client, on ``/v1/acp`` or on the stdio of the relay
  ``agent-gateway-acp`` (a child process, as an editor runs it); a delta is received when the
  SDK calls ``session_update`` with it (its JSON decoded and validated into ACP's types).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any, cast

from acp import PROTOCOL_VERSION, Client, connect_to_agent, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, Implementation
from acp.ws.client import create_websocket_stream

from benchmarks.harness import AUTH, Api
from benchmarks.streams import READ_SIZE, Stamps, request
from tests.gateway import TOKEN
from tests.integration.relayproc import relay_env

INFO = {"name": "acp-latency-benchmark", "version": "1"}


class _Turn:
    """The stamps of the turn being read, and when every delta of it has come."""

    def __init__(self) -> None:
        self.stamps = Stamps(0)
        self.done = asyncio.Event()

    def expect(self, count: int) -> Stamps:
        self.stamps = Stamps(count)
        self.done.clear()
        return self.stamps

    def take(self, payload: bytes, now: int) -> None:
        self.stamps.take(payload, now)
        if self.stamps.seen >= self.stamps.count:
            self.done.set()

    async def wait(self, limit_s: float) -> bool:
        """Whether every delta came within ``limit_s``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), limit_s)
        return self.done.is_set()


def client_frame(text: str) -> bytes:
    """A masked text frame, as a WebSocket client must send it."""
    payload = text.encode()
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x81, 0x80 | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x81, 0x80 | 127, size)
    key = (mask * (size // 4 + 1))[:size]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(size, "big")
    return head + mask + masked


class RawAcp:
    """``/v1/acp`` read on a raw socket."""

    def __init__(self, api: Api) -> None:
        self._api = api
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._buffer = bytearray()
        self._turn = _Turn()
        self._reading: asyncio.Future[None] | None = None
        self._ids = 0

    async def open(self, session_id: str) -> None:
        """Connect, initialize and load ``session_id`` after its last seq (nothing replayed)."""
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self._api.port)
        headers = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
            "Sec-WebSocket-Version": "13",
            **AUTH,
        }
        await request(self._reader, self._writer, self._api.port, "/v1/acp", headers, expect=101)
        await self._call("initialize", {"protocolVersion": PROTOCOL_VERSION, "clientInfo": INFO})
        after = await self._api.last_seq(session_id)
        cwd = str(self._api.gateway.workspace)
        meta = {"agentGateway": {"after": after}}
        await self._call(
            "session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": [], "_meta": meta}
        )

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._reader is not None
        assert self._writer is not None
        self._ids += 1
        message = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        self._writer.write(client_frame(json.dumps(message)))
        while True:
            for payload in self._frames():
                answer = json.loads(payload)
                if answer.get("id") == self._ids and "method" not in answer:
                    if "error" in answer:
                        raise RuntimeError(f"{method} refused: {answer['error']}")
                    result: dict[str, Any] = answer["result"]
                    return result
            data = await self._reader.read(READ_SIZE)
            if not data:
                raise ConnectionError(f"/v1/acp closed before answering {method}")
            self._buffer += data

    def _frames(self) -> list[bytes]:
        """The payloads of the complete frames buffered (text and continuation)."""
        frames, out = self._buffer, []
        while len(frames) >= 2:
            opcode, size, at = frames[0] & 0x0F, frames[1] & 0x7F, 2
            if size == 126:
                if len(frames) < 4:
                    break
                size, at = struct.unpack_from("!H", frames, 2)[0], 4
            elif size == 127:
                if len(frames) < 10:
                    break
                size, at = struct.unpack_from("!Q", frames, 2)[0], 10
            if len(frames) < at + size:
                break
            if opcode in (0, 1):
                out.append(bytes(frames[at : at + size]))
            elif opcode == 8:
                raise ConnectionError("/v1/acp closed the connection")
            del frames[: at + size]
        return out

    def expect(self, count: int) -> Stamps:
        """Read the next turn's ``count`` deltas (from now: before the turn starts)."""
        stamps = self._turn.expect(count)
        self._reading = asyncio.ensure_future(self._read_turn())
        return stamps

    async def turn(self, limit_s: float) -> bool:
        """Until every delta of the turn came (True) or ``limit_s`` passed."""
        done = await self._turn.wait(limit_s)
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
        return done

    async def _read_turn(self) -> None:
        assert self._reader is not None
        while not self._turn.done.is_set():
            data = await self._reader.read(READ_SIZE)
            if not data:
                return
            now = time.monotonic_ns()
            self._buffer += data
            for payload in self._frames():
                self._turn.take(payload, now)

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()


class _Recorder:
    """The SDK's ``Client``: stamps each agent message chunk when the SDK hands it over."""

    def __init__(self, turn: _Turn) -> None:
        self._turn = turn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        now = time.monotonic_ns()
        if update.session_update == "agent_message_chunk":
            self._turn.take(getattr(update.content, "text", "").encode(), now)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark agent asks nothing")


class SdkAcp:
    """The ACP SDK's client, on ``/v1/acp`` or (``relay_log`` given) on a relay's stdio."""

    def __init__(self, api: Api, *, relay_log: Path | None = None) -> None:
        self._api = api
        self._relay_log = relay_log
        self._turn = _Turn()
        self._stack = contextlib.AsyncExitStack()
        self.relay_pid: int | None = None

    async def open(self, session_id: str) -> None:
        """Connect (start the relay), initialize and load ``session_id`` after its last seq."""
        connection = await self._connect(cast(Client, _Recorder(self._turn)))
        await connection.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(**INFO),
        )
        after = await self._api.last_seq(session_id)
        await connection.load_session(
            cwd=str(self._api.gateway.workspace),
            session_id=session_id,
            mcp_servers=[],
            agentGateway={"after": after},
        )

    async def _connect(self, client: Client) -> ClientSideConnection:
        if self._relay_log is None:
            url = f"{self._api.gateway.ws_url}/v1/acp"
            transport = await create_websocket_stream(url, headers=AUTH)
            connection = connect_to_agent(client, transport)
            self._stack.push_async_callback(connection.close)
            return connection
        spawned = spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "agent_gateway_acp",
            "--url",
            self._api.gateway.base_url,
            "--log-file",
            str(self._relay_log),
            "--log-level",
            "warning",
            env=relay_env(TOKEN),
        )
        connection, process = await self._stack.enter_async_context(spawned)
        self.relay_pid = process.pid
        return connection

    def expect(self, count: int) -> Stamps:
        return self._turn.expect(count)

    async def turn(self, limit_s: float) -> bool:
        return await self._turn.wait(limit_s)

    async def aclose(self) -> None:
        await self._stack.aclose()
