"""Spawn overhead and event-loop lag while many sessions start."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import httpx

from benchmarks.harness import (
    Api,
    Section,
    Table,
    Target,
    bench_gateway,
    install_agent,
    ms,
    percentile,
    running,
    scratch,
)
from benchmarks.settings import RunConfig

MEASURES = (
    "Spawn: the agent records CLOCK_MONOTONIC as the first statement of its script (so "
    "interpreter start-up is inside both numbers). Gateway: from just before `POST …/turns` "
    "of a new session's first turn (which starts its process) to that stamp. Bare: from just "
    "before `asyncio.create_subprocess_exec` of the same executable, with pipes, from the "
    "benchmark process, to that stamp. Sessions are created beforehand and started one at a "
    "time. Event-loop lag, measured from outside: a thread of the benchmark process sends "
    "`GET /healthz` back to back over one keep-alive connection and records round-trip "
    "times, first with the gateway idle, then while 50 new sessions start their first turn "
    "at once (50 agent processes spawned) until every turn has completed."
)


async def _wait_lines(path: Path, count: int, limit_s: float = 30.0) -> list[str]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if path.exists():  # noqa: ASYNC240 - a few bytes of a local file, polled
            lines = path.read_text().splitlines()  # noqa: ASYNC240
            if len(lines) >= count:
                return lines
        await asyncio.sleep(0.001)
    raise TimeoutError(f"{path} has fewer than {count} lines")


async def gateway_spawns(api: Api, log: Path, count: int) -> list[float]:
    sessions = [await api.create_session() for _ in range(count)]
    delays: list[float] = []
    for i, session in enumerate(sessions):
        start = time.monotonic_ns()
        turn = await api.start_turn(session, "bench n=1 rate=0")
        lines = await _wait_lines(log, i + 1)
        delays.append(int(lines[i].split()[1]) - start)
        await api.wait_turn(session, turn)
        await api.delete_session(session)
    return delays


async def bare_spawns(agent: Path, log: Path, count: int) -> list[float]:
    env = {**os.environ, "BENCH_SPAWN_LOG": str(log)}
    delays: list[float] = []
    for i in range(count):
        start = time.monotonic_ns()
        process = await asyncio.create_subprocess_exec(
            str(agent),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        lines = await _wait_lines(log, i + 1)
        delays.append(int(lines[i].split()[1]) - start)
        process.kill()
        await process.communicate()
    return delays


class HealthProbe:
    """Back-to-back ``GET /healthz`` from a thread; round trips in ns."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=30.0) as client:
            while not self._stop.is_set():
                start = time.monotonic_ns()
                client.get("/healthz")
                self.samples.append(time.monotonic_ns() - start)
                time.sleep(0.002)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def lag_row(name: str, samples: list[int]) -> dict[str, object]:
    return {
        "phase": name,
        "probes": len(samples),
        "p50 ms": ms(percentile(samples, 50)),
        "p99 ms": ms(percentile(samples, 99)),
        "max ms": ms(max(samples)) if samples else float("nan"),
    }


async def run(config: RunConfig) -> Section:
    count = config.pick(quick=6, full=30)
    starting = config.pick(quick=20, full=50)
    section = Section(name="spawn", title="7. Spawn overhead and event-loop lag", measures=MEASURES)
    with scratch("spawn") as base:
        log = base / "spawns.log"
        async with running(
            bench_gateway(base, claude_code={"env": {"BENCH_SPAWN_LOG": str(log)}})
        ) as api:
            gateway = await gateway_spawns(api, log, count)
            bare_log = base / "bare.log"
            bare = await bare_spawns(install_agent(base / "bare"), bare_log, count)
            sessions = [await api.create_session() for _ in range(starting)]
            with HealthProbe(api.gateway.base_url) as idle:
                await asyncio.sleep(2)
            with HealthProbe(api.gateway.base_url) as busy:
                start = time.monotonic()
                turns = await asyncio.gather(
                    *(api.start_turn(s, "bench n=10 rate=0") for s in sessions)
                )
                await asyncio.gather(
                    *(api.wait_turn(s, t) for s, t in zip(sessions, turns, strict=True))
                )
                burst_s = time.monotonic() - start
            await asyncio.gather(*(api.delete_session(s) for s in sessions))
    spawn_rows = [
        {
            "spawn": name,
            "count": len(values),
            "p50 ms": ms(percentile(values, 50)),
            "p99 ms": ms(percentile(values, 99)),
            "max ms": ms(max(values)),
        }
        for name, values in (
            ("bare create_subprocess_exec", bare),
            ("gateway POST …/turns", gateway),
        )
    ]
    section.tables.append(Table(title="request to agent running", rows=spawn_rows))
    section.tables.append(
        Table(
            title=f"/healthz round trip; {starting} sessions starting took {burst_s:.2f} s",
            rows=[
                lag_row("idle", idle.samples),
                lag_row(f"{starting} sessions starting", busy.samples),
            ],
        )
    )
    overhead = ms(percentile(gateway, 50) - percentile(bare, 50))
    lag = ms(percentile(busy.samples, 99))
    section.targets += [
        Target(
            name="spawn overhead over a bare spawn (p50)",
            goal="<= 5 ms",
            value=f"{overhead} ms",
            met=overhead <= 5,
        ),
        Target(
            name=f"event-loop lag p99, {starting} sessions starting (/healthz RTT)",
            goal="< 10 ms",
            value=f"{lag} ms",
            met=lag < 10,
        ),
    ]
    return section
