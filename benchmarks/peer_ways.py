"""The two ways a prompt reaches OpenCode in the side-by-side benchmark: through the gateway
(``ThroughGateway``) and straight against an ``opencode serve`` started as the gateway starts
it (``opencode_direct``), each a ``Way`` that makes sessions and times their turns."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx

from app.process.childspec import child_environment
from app.providers.opencode.config import (
    SERVER_USERNAME,
    build_argv,
    model_ref,
    passthrough_for,
    server_env,
)
from app.providers.opencode.permissions import permission_ruleset
from app.settings import PINNED_CLI_BIN
from benchmarks.harness import AUTH, Api, descendants
from benchmarks.realcli import Setup
from benchmarks.ssetap import GATEWAY_ENDS, SseTap, Turn
from tests.e2e.providers import CONFIGS
from tests.gateway import free_port

REPLY_CHARS = 2000
PROMPT = f"Tell me a long story. [[long:{REPLY_CHARS}]]"
TURN_LIMIT_S = 120.0
START_LIMIT_S = 60.0


async def _ended(turn: Turn, tap: SseTap) -> Turn:
    """Wait for ``turn`` to end on ``tap``'s stream (or the stream to fail)."""
    waiter = asyncio.create_task(turn.done.wait())
    try:
        await asyncio.wait(
            {waiter, tap.task}, timeout=TURN_LIMIT_S, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        waiter.cancel()
    if not turn.done.is_set():
        failure = tap.task.exception() if tap.task.done() else None
        raise RuntimeError(f"the turn did not end within {TURN_LIMIT_S} s: {failure!r}")
    if turn.error is not None:
        raise RuntimeError(f"the turn failed: {turn.error}")
    if turn.chars != REPLY_CHARS:
        raise RuntimeError(f"the reply came with {turn.chars} characters, not {REPLY_CHARS}")
    return turn


class Way(Protocol):
    label: str
    workspace: Path

    async def new_session(self) -> tuple[str, float]:
        """A session with its stream open; the ms its creation request took."""
        ...

    async def turn(self, session_id: str) -> Turn: ...

    def taps(self) -> Sequence[SseTap]: ...

    def relay_pid(self) -> int | None:
        """The gateway's pid (None for the direct way)."""
        ...

    def server_pids(self) -> list[int]:
        """The ``opencode serve`` process and everything below it."""
        ...


class ThroughGateway:
    label = "gateway"

    def __init__(self, api: Api, stack: contextlib.AsyncExitStack, workspace: Path) -> None:
        self.api = api
        self.workspace = workspace
        self.stack = stack
        self._taps: dict[str, SseTap] = {}
        self._turns: dict[str, Turn] = {}

    async def new_session(self) -> tuple[str, float]:
        start = time.monotonic_ns()
        session_id = await self.api.create_session()
        created_ms = (time.monotonic_ns() - start) / 1e6
        headers = {**AUTH, "Accept": "text/event-stream"}
        response = await self.stack.enter_async_context(
            self.api.http.stream(
                "GET",
                f"/v1/sessions/{session_id}/events",
                headers=headers,
                timeout=httpx.Timeout(40.0, read=None),
            )
        )
        response.raise_for_status()
        tap = SseTap(response, lambda data, now: self._message(session_id, data, now))
        self.stack.push_async_callback(tap.close)
        await asyncio.wait_for(tap.connected.wait(), START_LIMIT_S)
        self._taps[session_id] = tap
        return session_id, created_ms

    def _message(self, session_id: str, data: str, now: int) -> None:
        turn = self._turns.get(session_id)
        if turn is None or turn.done.is_set():
            return
        envelope = json.loads(data)
        kind = envelope.get("type")
        if kind == "message.delta":
            turn.first_text_ns = turn.first_text_ns or now
            turn.chars += len(envelope["data"]["text"])
        elif kind in GATEWAY_ENDS:
            if kind != "turn.completed":
                turn.error = data[:2000]
            self._taps[session_id].end(turn, now)

    async def turn(self, session_id: str) -> Turn:
        tap = self._taps[session_id]
        turn = self._turns[session_id] = Turn()
        tap.begin(turn)
        await self.api.start_turn(session_id, PROMPT)  # a 409 right after the last: again
        turn.accepted_ns = time.monotonic_ns()
        return await _ended(turn, tap)

    def taps(self) -> Sequence[SseTap]:
        return list(self._taps.values())

    def relay_pid(self) -> int | None:
        return self.api.pid

    def server_pids(self) -> list[int]:
        return descendants(self.api.pid)


class OpenCodeDirect:
    label = "direct"

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        http: httpx.AsyncClient,
        workspace: Path,
        model: dict[str, str] | None,
    ) -> None:
        self.process = process
        self.http = http
        self.workspace = workspace
        self.model = model
        self.tap: SseTap | None = None
        self._turns: dict[str, Turn] = {}
        self._made = 0

    @property
    def where(self) -> dict[str, str]:
        return {"directory": str(self.workspace)}

    async def new_session(self) -> tuple[str, float]:
        self._made += 1
        body = {"title": f"peer benchmark {self._made}", "permission": permission_ruleset("ask")}
        start = time.monotonic_ns()
        response = await self.http.post("/session", params=self.where, json=body)
        created_ms = (time.monotonic_ns() - start) / 1e6
        response.raise_for_status()
        session_id: str = response.json()["id"]
        return session_id, created_ms

    def _message(self, data: str, now: int) -> None:
        event = json.loads(data)
        event = event.get("payload", event)  # /global/event wraps each in {directory, payload}
        kind = event.get("type")
        props = event.get("properties") or {}
        turn = self._turns.get(props.get("sessionID") or "")
        if turn is None or turn.done.is_set():
            return
        if kind == "message.updated" and (props.get("info") or {}).get("role") == "user":
            turn.users.add(props["info"].get("id"))
        elif kind == "session.status" and (props.get("status") or {}).get("type") == "busy":
            turn.armed = True
        elif (
            kind == "message.part.delta"
            and props.get("field") == "text"
            and props.get("messageID") not in turn.users
        ):
            turn.first_text_ns = turn.first_text_ns or now
            turn.chars += len(props.get("delta") or "")
        elif kind == "session.error":
            turn.error = data[:2000]
        elif kind == "session.idle" and turn.armed:  # not a previous turn's straggler
            assert self.tap is not None
            self.tap.end(turn, now)

    async def turn(self, session_id: str) -> Turn:
        assert self.tap is not None
        body: dict[str, Any] = {"parts": [{"type": "text", "text": PROMPT}]}
        if self.model is not None:
            body["model"] = self.model
        turn = self._turns[session_id] = Turn()
        self.tap.begin(turn)
        response = await self.http.post(
            f"/session/{session_id}/prompt_async", params=self.where, json=body
        )
        turn.accepted_ns = time.monotonic_ns()
        response.raise_for_status()
        return await _ended(turn, self.tap)

    def taps(self) -> Sequence[SseTap]:
        return [self.tap] if self.tap is not None else []

    def relay_pid(self) -> int | None:
        return None

    def server_pids(self) -> list[int]:
        return [self.process.pid, *descendants(self.process.pid)]


@contextlib.asynccontextmanager
async def opencode_direct(
    setup: Setup, name: str = "direct", events: str = "/event"
) -> AsyncIterator[OpenCodeDirect]:
    """``opencode serve`` as the gateway starts it, with its own HOME and workspace, and a
    client reading the workspace's event stream (``events``: or the gateway's one)."""
    home = setup.base / f"home-{name}"
    workspace = setup.workspace.parent / name  # not a prefix of the gateway's, nor it of this
    home.mkdir(parents=True)
    workspace.mkdir(parents=True)
    config = CONFIGS["opencode"](setup.stub, home)
    password = secrets.token_urlsafe(32)
    env = child_environment(
        os.environ,
        passthrough=passthrough_for(config["model"], config["config"]),
        overlay=server_env(overlay=config["env"], config=config["config"], password=password),
    )
    argv = build_argv(executable=str(PINNED_CLI_BIN / "opencode"), port=free_port())
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd="/",
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    drains: list[asyncio.Task[bytes]] = []
    try:
        base_url = await asyncio.wait_for(_listening(process.stdout), START_LIMIT_S)
        # As the gateway does: keep reading both pipes, so the server never blocks on them.
        drains = [asyncio.create_task(pipe.read()) for pipe in (process.stdout, process.stderr)]
        async with httpx.AsyncClient(
            base_url=base_url,
            auth=httpx.BasicAuth(SERVER_USERNAME, password),
            timeout=30.0,
            trust_env=False,
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
        ) as http:
            direct = OpenCodeDirect(process, http, workspace, model_ref(config["model"]))
            async with http.stream(
                "GET", events, params=direct.where, timeout=httpx.Timeout(30.0, read=None)
            ) as response:
                response.raise_for_status()
                direct.tap = SseTap(response, direct._message)
                try:
                    await asyncio.wait_for(direct.tap.connected.wait(), START_LIMIT_S)
                    yield direct
                finally:
                    await direct.tap.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
        await asyncio.gather(*drains, return_exceptions=True)


async def _listening(stdout: asyncio.StreamReader) -> str:
    """The URL of the ``opencode server listening on http://…`` line."""
    while line := await stdout.readline():
        if b"listening on " in line:
            return line.split(b"listening on ", 1)[1].split()[0].decode()
    raise RuntimeError("opencode serve exited before listening")
