"""Soak: many session create / turn / delete cycles; what is left afterwards."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx

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
from tests.gateway import log_lines

MEASURES = (
    "Cycles of: create a session, run one turn (the agent process starts, streams 5 deltas, "
    "the turn completes), delete the session (its process is stopped); 4 cycles at a time. "
    "Sampled from outside the gateway process: RSS (/proc/<pid>/statm), open descriptors "
    "(/proc/<pid>/fd), OS threads (/proc/<pid>/task) and live descendant processes (by parent "
    "pid). asyncio tasks cannot be counted from outside the process, so they are not reported; "
    "a leaked task would show up as growing RSS or descriptors. The first sample is taken "
    "after 20 warm-up cycles."
)


MAX_FAILURES = 8
"""Failed requests after which the soak stops (each may have waited for a timeout)."""


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


async def cycle(api: Api, failures: Counter[str]) -> None:
    """One cycle; a refused request is counted (status and problem type), not fatal."""
    try:
        session = await api.create_session()
        status = await api.run_turn(session, "bench n=5 rate=0")
        if status != "completed":
            failures[f"turn {status}"] += 1
        await api.delete_session(session)
    except httpx.HTTPStatusError as exc:
        response = exc.response
        kind = (
            response.json().get("type", "")
            if response.headers.get("content-type", "").endswith("json")
            else ""
        )
        failures[f"{response.request.method} {response.status_code} {kind}".strip()] += 1
    except httpx.TransportError as exc:  # no answer within the client's timeout
        failures[f"{exc.request.method} {type(exc).__name__}"] += 1


async def run(config: RunConfig) -> Section:
    total = config.pick(quick=40, full=1000)
    every = max(total // 5, 1)
    parallel = 4
    section = Section(name="soak", title="10. Soak", measures=MEASURES)
    rows: list[dict[str, object]] = []
    failures: Counter[str] = Counter()
    with scratch("soak") as base:
        async with running(bench_gateway(base)) as api:
            for _ in range(20 // parallel):
                await asyncio.gather(*(cycle(api, failures) for _ in range(parallel)))
            started = time.monotonic()
            rows.append(sample(api, 0, started))
            done = 0
            while done < total and sum(failures.values()) < MAX_FAILURES:
                await asyncio.gather(*(cycle(api, failures) for _ in range(parallel)))
                done += parallel
                if done % every == 0:
                    rows.append(sample(api, done, started))
            await asyncio.sleep(1)  # processes stopped by delete are reaped by now
            rows.append({**sample(api, done, started), "cycles": f"{done} (+1 s)"})
            if done < total:
                section.notes.append(
                    f"Stopped after {done} of {total} cycles: {MAX_FAILURES} requests failed."
                )
            problems = [
                line["msg"][:300]
                for line in log_lines(api.gateway)
                if line.get("level") in {"warning", "error", "critical"}
            ]
    section.tables.append(Table(title=f"{total} cycles", rows=rows))
    failed = sum(failures.values())
    section.tables.append(
        Table(
            title="refused or failed requests during the soak",
            rows=[{"request": k, "count": v} for k, v in failures.most_common()]
            or [{"request": "none", "count": 0}],
        )
    )
    for message, count in Counter(problems).most_common(3):
        section.notes.append(f"gateway logged {count}x: {message}")
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
            name="requests failed during the soak",
            goal="0",
            value=f"{failed} (cycles run: {done + 20} of {total + 20})",
            met=failed == 0,
        ),
        Target(
            name="descriptors",
            goal="flat",
            value=f"{first['fds']} → {last['fds']}",
            met=int(str(last["fds"])) <= int(str(first["fds"])) + 5,
        ),
    ]
    return section
