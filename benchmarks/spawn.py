"""Spawn overhead and event-loop lag while many sessions start."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.process.sandbox import Confinement, wrap
from app.providers.sandboxing import inside_uid, installation
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
    "time. The sandbox's cost: the same gateway spawns with `sandbox.mode = none` and with "
    "`bwrap` (the default where it works), against a bare spawn of the same agent wrapped in "
    "the same `bwrap` command line (its floor: what bubblewrap itself costs). Event-loop lag, "
    "measured from outside: a thread of the benchmark process sends "
    "`GET /healthz` back to back over one keep-alive connection and records round-trip "
    "times, first with the gateway idle, then while 50 new sessions start their first turn "
    "at once (50 agent processes spawned) until every turn has completed. Measured inside: "
    "the gateway's own probe (`agent_gateway_event_loop_lag_seconds`, sampled every 5 ms for "
    "the benchmark) over the same two windows; its quantiles are the upper bounds of the "
    "histogram buckets they fall in (1, 2, 3, 5, 7.5, 10, 15, 25, 50 ms, …)."
)
LAG = "agent_gateway_event_loop_lag_seconds_bucket"


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


def sandboxed(agent: Path, base: Path) -> tuple[str, ...]:
    """``agent`` in the ``bwrap`` command line a session's agent gets (its home, its
    installation, ``base`` writable for the spawn log)."""
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    confinement = Confinement(
        bwrap=shutil.which("bwrap") or "bwrap",
        read_only=installation(str(agent), os.environ),
        writable=(base,),
        home=home,
        as_user=inside_uid(),
    )
    return wrap(confinement, (str(agent),))


async def bare_spawns(argv: tuple[str, ...], log: Path, count: int) -> list[float]:
    env = {**os.environ, "BENCH_SPAWN_LOG": str(log)}
    delays: list[float] = []
    for i in range(count):
        start = time.monotonic_ns()
        process = await asyncio.create_subprocess_exec(
            *argv,
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


async def lag_buckets(api: Api) -> dict[float, float]:
    """The gateway's loop-lag histogram: ``{upper bound in s: cumulative count}``."""
    response = await api.http.get("/metrics")
    response.raise_for_status()
    return {
        float(sample.labels["le"]): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name == LAG
    }


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The upper bound (ms) of the bucket holding quantile ``q`` of the samples taken
    between two scrapes."""
    counts = sorted((bound, after[bound] - before.get(bound, 0.0)) for bound in after)
    total = counts[-1][1]
    for bound, cumulative in counts:
        if total and cumulative >= q / 100 * total:
            return bound * 1000
    return float("nan")


def lag_row(
    name: str, samples: list[int], inside: tuple[dict[float, float], dict[float, float]]
) -> dict[str, object]:
    before, after = inside
    return {
        "phase": name,
        "/healthz probes": len(samples),
        "RTT p50 ms": ms(percentile(samples, 50)),
        "RTT p99 ms": ms(percentile(samples, 99)),
        "RTT max ms": ms(max(samples)) if samples else float("nan"),
        "loop samples": after[float("inf")] - before.get(float("inf"), 0.0),
        "loop lag p50 ms ≤": bucket_quantile(before, after, 50),
        "loop lag p99 ms ≤": bucket_quantile(before, after, 99),
    }


async def run(config: RunConfig) -> Section:
    count = config.pick(quick=6, full=30)
    starting = config.pick(quick=20, full=50)
    section = Section(name="spawn", title="7. Spawn overhead and event-loop lag", measures=MEASURES)
    with scratch("spawn") as base:
        unconfined_log = base / "none" / "spawns.log"
        async with running(
            bench_gateway(
                base / "none",
                claude_code={"env": {"BENCH_SPAWN_LOG": str(unconfined_log)}},
                sandbox={"mode": "none"},
            )
        ) as api:
            unconfined = await gateway_spawns(api, unconfined_log, count)
        bwrap_log = base / "bare-bwrap" / "spawns.log"
        agent = install_agent(base / "bare")
        bare_bwrap = await bare_spawns(sandboxed(agent, bwrap_log.parent), bwrap_log, count)
        log = base / "spawns.log"
        async with running(
            bench_gateway(
                base,
                claude_code={"env": {"BENCH_SPAWN_LOG": str(log)}},
                sandbox={"mode": "bwrap"},
                server={"loop_lag_probe_s": 0.005},
            )
        ) as api:
            gateway = await gateway_spawns(api, log, count)
            bare_log = base / "bare.log"
            bare = await bare_spawns((str(agent),), bare_log, count)
            sessions = [await api.create_session() for _ in range(starting)]
            idle_lag = [await lag_buckets(api)]
            with HealthProbe(api.gateway.base_url) as idle:
                await asyncio.sleep(2)
            idle_lag.append(await lag_buckets(api))
            busy_lag = [await lag_buckets(api)]
            with HealthProbe(api.gateway.base_url) as busy:
                start = time.monotonic()
                turns = await asyncio.gather(
                    *(api.start_turn(s, "bench n=10 rate=0") for s in sessions)
                )
                await asyncio.gather(
                    *(api.wait_turn(s, t) for s, t in zip(sessions, turns, strict=True))
                )
                burst_s = time.monotonic() - start
            busy_lag.append(await lag_buckets(api))
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
            ("bare, in the same bwrap command", bare_bwrap),
            ("gateway POST …/turns, sandbox none", unconfined),
            ("gateway POST …/turns, sandbox bwrap", gateway),
        )
    ]
    section.tables.append(Table(title="request to agent running", rows=spawn_rows))
    section.tables.append(
        Table(
            title=f"event-loop lag; {starting} sessions starting took {burst_s:.2f} s",
            rows=[
                lag_row("idle", idle.samples, (idle_lag[0], idle_lag[1])),
                lag_row(f"{starting} sessions starting", busy.samples, (busy_lag[0], busy_lag[1])),
            ],
        )
    )
    overhead = ms(percentile(unconfined, 50) - percentile(bare, 50))
    sandbox = ms(percentile(gateway, 50) - percentile(unconfined, 50))
    floor = ms(percentile(bare_bwrap, 50) - percentile(bare, 50))
    lag = bucket_quantile(busy_lag[0], busy_lag[1], 99)
    rtt = ms(percentile(busy.samples, 99))
    section.targets += [
        Target(
            name="spawn overhead over a bare spawn (p50), sandbox none",
            goal="<= 5 ms",
            value=f"{overhead} ms",
            met=overhead <= 5,
        ),
        Target(
            name="the sandbox's cost per spawn (p50, bwrap minus none)",
            goal="<= bubblewrap's own cost + 5 ms",
            value=f"{sandbox} ms (bubblewrap alone: {floor} ms)",
            met=sandbox <= floor + 5,
        ),
        Target(
            name=f"event-loop lag p99, {starting} sessions starting",
            goal="< 10 ms",
            value=f"≤ {lag:g} ms in the gateway (/healthz RTT p99 {rtt} ms)",
            met=lag < 10,
        ),
    ]
    return section
