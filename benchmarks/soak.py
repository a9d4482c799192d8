"""Soak: many session create / turn / delete cycles; what is left afterwards."""

from __future__ import annotations

import asyncio
import time

from benchmarks.harness import (
    Api,
    Section,
    Table,
    Target,
    bench_gateway,
    descendants,
    fd_count,
    rss_bytes,
    running,
    scratch,
    thread_count,
)
from benchmarks.settings import RunConfig

MEASURES = (
    "Cycles of: create a session, run one turn (the agent process starts, streams 5 deltas, "
    "the turn completes), delete the session (its process is stopped); 4 cycles at a time. "
    "Sampled from outside the gateway process: RSS (/proc/<pid>/statm), open descriptors "
    "(/proc/<pid>/fd), OS threads (/proc/<pid>/task) and live descendant processes (by parent "
    "pid). asyncio tasks cannot be counted from outside the process, so they are not reported; "
    "a leaked task would show up as growing RSS or descriptors. The first sample is taken "
    "after 20 warm-up cycles."
)


def sample(api: Api, cycles: int, started: float) -> dict[str, object]:
    pid = api.pid
    return {
        "cycles": cycles,
        "elapsed s": round(time.monotonic() - started, 1),
        "RSS MiB": round(rss_bytes(pid) / 2**20, 1),
        "fds": fd_count(pid),
        "threads": thread_count(pid),
        "child processes": len(descendants(pid)),
    }


async def cycle(api: Api) -> None:
    session = await api.create_session()
    await api.run_turn(session, "bench n=5 rate=0")
    await api.delete_session(session)


async def run(config: RunConfig) -> Section:
    total = config.pick(quick=60, full=1000)
    every = max(total // 5, 1)
    parallel = 4
    section = Section(name="soak", title="10. Soak", measures=MEASURES)
    rows: list[dict[str, object]] = []
    with scratch("soak") as base:
        async with running(bench_gateway(base)) as api:
            for _ in range(20 // parallel):
                await asyncio.gather(*(cycle(api) for _ in range(parallel)))
            started = time.monotonic()
            rows.append(sample(api, 0, started))
            done = 0
            while done < total:
                await asyncio.gather(*(cycle(api) for _ in range(parallel)))
                done += parallel
                if done % every == 0:
                    rows.append(sample(api, done, started))
            await asyncio.sleep(1)  # processes stopped by delete are reaped by now
            rows.append({**sample(api, done, started), "cycles": f"{done} (+1 s)"})
    section.tables.append(Table(title=f"{total} cycles", rows=rows))
    first, last = rows[0], rows[-1]
    growth = float(str(last["RSS MiB"])) - float(str(first["RSS MiB"]))
    leftover = int(str(last["child processes"]))
    section.targets += [
        Target(
            name="RSS growth over the soak",
            goal="flat",
            value=f"{first['RSS MiB']} → {last['RSS MiB']} MiB ({growth:+.1f})",
            met=growth < 10,
        ),
        Target(name="leftover processes", goal="0", value=str(leftover), met=leftover == 0),
        Target(
            name="descriptors",
            goal="flat",
            value=f"{first['fds']} → {last['fds']}",
            met=int(str(last["fds"])) <= int(str(first["fds"])) + 5,
        ),
    ]
    return section
