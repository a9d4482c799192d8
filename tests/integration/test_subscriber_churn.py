"""Thousands of subscribers coming and going leak nothing (R9): the real app under uvicorn in
this process on a real socket, so its file descriptors and tasks can be counted; the churn runs
in another process."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from app.main import create_app
from app.runtime.eventlog import EventLog
from app.settings import Settings
from app.store.schema import upgrade_async
from tests.fakes.gateway import FAKE_CLAUDE, fake_claude_login
from tests.gateway import TOKEN
from tests.integration.streams import (
    AUTH,
)

# --- R9: subscriber churn ---------------------------------------------------------------------

CHURN_SSE = 1600
CHURN_WS = 400
CHURN_WORKERS = 40


@pytest.fixture
async def in_process_gateway(tmp_path: Path) -> AsyncIterator[tuple[str, FastAPI]]:
    """The real app under uvicorn on a real loopback socket, in this test's event loop."""
    workspace = tmp_path / "roots" / "project"
    workspace.mkdir(parents=True)
    settings = Settings(
        server={"token": TOKEN, "allow_root": True},
        storage={"data_dir": tmp_path / "data"},
        workspaces={"roots": [tmp_path / "roots"]},
        providers={
            "claude_code": {
                "executable": str(FAKE_CLAUDE),
                "env": fake_claude_login(tmp_path / "login"),
            },
            "codex": {"enabled": False},
            "opencode": {"enabled": False},
        },
        limits={"max_subscribers_per_session": 1000},
    )
    await upgrade_async(settings.storage.database_url)
    app = create_app(settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(20):
        # uvicorn has no awaitable for "listening"; bounded by the timeout.
        while not server.started:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    try:
        yield f"127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        await serving
        sock.close()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


CHURN_CLIENT = """
import asyncio, json, sys
from websockets.asyncio.client import connect

address, token, sse, ws, workers = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
sessions = sys.argv[6:]
auth = {"Authorization": "Bearer " + token}


async def sse_cycle(sid):
    # Connect, read until the stream is open, hang up.
    host, port = address.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"GET /v1/sessions/{sid}/events HTTP/1.1\\r\\nHost: {address}\\r\\n"
        f"Authorization: Bearer {token}\\r\\nAccept: text/event-stream\\r\\n\\r\\n".encode()
    )
    head = await reader.readuntil(b": connected")
    assert head.startswith(b"HTTP/1.1 200"), head[:300]
    writer.close()
    await writer.wait_closed()


async def ws_cycle(sid):
    async with connect(f"ws://{address}/v1/sessions/{sid}/ws", additional_headers=auth) as c:
        assert json.loads(await c.recv())["seq"] == 1


async def main():
    jobs = [sse_cycle] * sse + [ws_cycle] * ws
    queue = asyncio.Queue()
    for index in range(len(jobs)):
        queue.put_nowait(index)

    async def worker():
        while not queue.empty():
            index = queue.get_nowait()
            await jobs[index](sessions[index % len(sessions)])

    await asyncio.gather(*(worker() for _ in range(workers)))


asyncio.run(main())
"""


async def churn(address: str, sessions: list[str], sse: int, ws: int) -> None:
    """Open and drop ``sse`` SSE and ``ws`` WebSocket subscriptions from another process."""
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHURN_CLIENT,
        address,
        TOKEN,
        str(sse),
        str(ws),
        str(CHURN_WORKERS),
        *sessions,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await client.communicate()
    assert client.returncode == 0, stderr.decode()[-3000:]


async def test_r9_thousands_of_subscribers_coming_and_going_leak_nothing(
    in_process_gateway: tuple[str, FastAPI], caplog: pytest.LogCaptureFixture
) -> None:
    """SSE and WebSocket subscribers connect, start to stream and hang up, thousands of times;
    the gateway's open files, tasks and subscribers return to where they were."""
    address, app = in_process_gateway
    events: EventLog = app.state.manager.events
    async with httpx.AsyncClient(base_url=f"http://{address}", headers=AUTH) as client:
        sessions = []
        for _ in range(8):
            created = await client.post(
                "/v1/sessions",
                json={"workspace": str(Path(app.state.settings.workspaces.roots[0]) / "project")},
            )
            assert created.status_code == 201, created.text
            sessions.append(created.json()["id"])
    await churn(address, sessions, 200, 100)  # warm up: pools and caches at their size

    async def settled(fds: int, tasks: int) -> None:
        async with asyncio.timeout(20):
            # The server gives these back after each disconnect, with no event to await.
            while not (  # noqa: ASYNC110
                events.subscriber_count() == 0
                and len(asyncio.all_tasks()) <= tasks
                and open_fds() <= fds
            ):
                await asyncio.sleep(0.05)

    await settled(10_000, 10_000)
    before = (open_fds(), len(asyncio.all_tasks()))
    peak = 0

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, events.subscriber_count())
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    await churn(address, sessions, CHURN_SSE, CHURN_WS)
    sampler.cancel()
    await settled(*before)
    assert peak > 1  # the subscribers were there, many at once
    assert events.subscriber_count() == 0
    assert open_fds() <= before[0]
    assert len(asyncio.all_tasks()) <= before[1]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
