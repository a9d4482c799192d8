"""Memory: the gateway with idle sessions; the CLIs with live sessions; closing idle Claude."""

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
    rss_bytes,
    running,
    scratch,
    tree_rss,
)
from benchmarks.realcli import PROVIDERS, gateway_running, stub_setup, timed_turn
from benchmarks.settings import RunConfig

MEASURES = (
    "RSS from /proc/<pid>/statm. Idle sessions: created (`POST /v1/sessions`), never given a "
    "turn, so no CLI process; the gateway's own RSS after each step. Live sessions: N "
    "sessions per provider, each having completed one turn against the stub model; CLI RSS is "
    "the sum over every process below the gateway (Claude Code: one per session; Codex and "
    "OpenCode: their shared server). Closing idle Claude processes: the same Claude Code "
    "sessions with `idle_timeout_s` short, measured again once every process has closed, and "
    "the cost: the next turn's time to first text (the process is started again with "
    "`--resume`) next to a turn on a live process."
)

MIB = 2**20


async def idle_sessions(config: RunConfig) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with scratch("memory") as base:
        async with running(bench_gateway(base)) as api:
            created = 0
            for target in (0, 100, config.pick(quick=200, full=1000)):
                while created < target:
                    batch = min(20, target - created)
                    await asyncio.gather(*(api.create_session() for _ in range(batch)))
                    created += batch
                await asyncio.sleep(0.5)
                rows.append(
                    {"idle sessions": target, "gateway RSS MiB": round(rss_bytes(api.pid) / MIB, 1)}
                )
    return rows


async def _sessions_with_turn(api: Api, count: int) -> list[str]:
    sessions = [await api.create_session() for _ in range(count)]
    for session in sessions:
        await api.run_turn(session, "Say hello")
    return sessions


async def _until_no_children(pid: int, limit_s: float) -> float:
    start = time.monotonic()
    while descendants(pid) and time.monotonic() - start < limit_s:  # noqa: ASYNC110 - /proc
        await asyncio.sleep(0.2)
    return time.monotonic() - start


async def run(config: RunConfig) -> Section:
    live = config.pick(quick=2, full=10)
    idle_timeout = config.pick(quick=5, full=20)
    section = Section(name="memory", title="5. Memory", measures=MEASURES)
    idle = await idle_sessions(config)
    section.tables.append(Table(title="gateway with idle sessions", rows=idle))
    rss_1000 = float(str(idle[-1]["gateway RSS MiB"]))
    section.targets.append(
        Target(
            name=f"gateway RSS, {idle[-1]['idle sessions']} idle sessions",
            goal="<= 150 MB",
            value=f"{rss_1000} MiB",
            met=rss_1000 * MIB <= 150e6,
        )
    )
    rows: list[dict[str, object]] = []
    closing: list[dict[str, object]] = []
    with scratch("memory-cli") as base, stub_setup(base) as setup:
        for provider in PROVIDERS if not config.quick else ("claude_code",):
            overrides = {"idle_timeout_s": idle_timeout} if provider == "claude_code" else {}
            async with gateway_running(setup, provider, **overrides) as api:
                sessions = await _sessions_with_turn(api, live)
                processes = descendants(api.pid)
                rows.append(
                    {
                        "provider": provider,
                        "live sessions": live,
                        "CLI processes": len(processes),
                        "CLI RSS MiB": round(tree_rss(processes) / MIB, 1),
                        "gateway RSS MiB": round(rss_bytes(api.pid) / MIB, 1),
                    }
                )
                if provider != "claude_code":
                    continue
                warm = await timed_turn(api, sessions[-1])
                closing.append(
                    {
                        "state": f"{live} live Claude processes",
                        "CLI processes": len(processes),
                        "CLI RSS MiB": round(tree_rss(processes) / MIB, 1),
                        "gateway RSS MiB": round(rss_bytes(api.pid) / MIB, 1),
                        "next turn first text ms": warm.first_text_ms,
                    }
                )
                waited = await _until_no_children(api.pid, idle_timeout + 30)
                left = descendants(api.pid)
                resumed = await timed_turn(api, sessions[0])
                closing.append(
                    {
                        "state": f"after idle_timeout_s={idle_timeout} (closed in {waited:.0f} s)",
                        "CLI processes": len(left),
                        "CLI RSS MiB": round(tree_rss(left) / MIB, 1),
                        "gateway RSS MiB": round(rss_bytes(api.pid) / MIB, 1),
                        "next turn first text ms": resumed.first_text_ms,
                    }
                )
    section.tables.append(Table(title="CLI processes with live sessions", rows=rows))
    section.tables.append(Table(title="closing idle Claude Code processes", rows=closing))
    return section
