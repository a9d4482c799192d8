"""Memory and process-count limits on real children, enforced the way this machine allows
(``limits.enforcement`` ``auto``: a cgroup v2 group per child where the gateway may make one,
else ``RLIMIT_DATA`` for memory and the watchdog for the process count; app/process/bounds.py).

The memory test runs with a watchdog that never looks in time, so only the kernel can stop the
allocation; each test ends with no process of the child left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.process.bounds import Enforcement
from app.process.childspec import ProcessLimits, ProcessSpec, child_environment
from app.process.managed import ManagedProcess
from app.process.orphans import TAG_ENV
from app.process.runner import ProcessRunner
from app.process.watchdog import ProcessWatchdog
from app.providers.exits import limit_error
from tests.gateway import wait_until

MIB = 1024 * 1024
ENFORCEMENT = Enforcement.choose("auto")

ALLOCATE = """
chunks = []
while True:
    chunks.append(b"\\x01" * (8 << 20))  # written: resident at once
"""

FORK = """
import subprocess, time
children = []
for _ in range(200):
    try:
        children.append(subprocess.Popen(["sleep", "1000"]))
    except OSError:  # refused at the cgroup's pids.max
        pass
print("forked", flush=True)
time.sleep(1000)
"""


def tagged(tag: str) -> list[int]:
    """Pids of live processes that carry ``tag`` (the child and everything it started)."""
    found = []
    needle = f"{TAG_ENV}={tag}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
    return found


@contextlib.asynccontextmanager
async def watched(limits: ProcessLimits, *, interval_s: float) -> AsyncIterator[ProcessRunner]:
    runner = ProcessRunner(limits=limits, enforcement=ENFORCEMENT)
    watchdog = asyncio.create_task(ProcessWatchdog(runner, interval_s=interval_s, reap=False).run())
    try:
        yield runner
    finally:
        watchdog.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watchdog
        await runner.aclose(grace_s=0.5)


def spec(tmp_path: Path, code: str) -> ProcessSpec:
    env = child_environment(os.environ, passthrough=(), overlay={})
    return ProcessSpec(argv=(sys.executable, "-c", code), cwd=tmp_path, env=env, label="test")


async def read_to_end(child: ManagedProcess) -> None:
    """Read stdout to EOF, as a provider's reader does before it asks ``exceeded``."""
    while await child.read_line() is not None:
        pass


async def test_a_child_allocating_past_the_memory_limit_ends_as_memory_limit_at_once(
    tmp_path: Path,
) -> None:
    assert ENFORCEMENT.memory in ("cgroup", "rlimit"), ENFORCEMENT.detail
    limits = ProcessLimits(max_rss_bytes=128 * MIB, max_processes=64)
    async with watched(limits, interval_s=3600) as runner:
        started = time.monotonic()
        child = await runner.spawn(spec(tmp_path, ALLOCATE))
        async with asyncio.timeout(10):
            await read_to_end(child)
        exceeded = child.exceeded
        assert exceeded is not None, (child.returncode, child.stderr_tail)
        assert (exceeded.reason, exceeded.limit) == ("memory_limit", 128 * MIB)
        assert exceeded.observed >= 0.9 * 128 * MIB
        assert time.monotonic() - started < 10
        error = limit_error(exceeded, cli="python", provider="test")
        assert (error.kind, error.reason) == ("resource_limit", "memory_limit")
        await child.stop(grace_s=1, term_s=1)
        assert tagged(child.tag) == []


async def test_a_child_forking_past_the_process_limit_ends_as_process_limit(
    tmp_path: Path,
) -> None:
    limits = ProcessLimits(max_rss_bytes=1024 * MIB, max_processes=20)
    async with watched(limits, interval_s=0.1) as runner:
        started = time.monotonic()
        child = await runner.spawn(spec(tmp_path, FORK))
        async with asyncio.timeout(15):
            await read_to_end(child)
        exceeded = child.exceeded
        assert exceeded is not None, (child.returncode, child.stderr_tail)
        assert (exceeded.reason, exceeded.limit) == ("process_limit", 20)
        assert exceeded.observed > 20
        assert time.monotonic() - started < 15
        error = limit_error(exceeded, cli="python", provider="test")
        assert (error.kind, error.reason) == ("resource_limit", "process_limit")
        await child.stop(grace_s=1, term_s=1)
        # Killed descendants (re-parented, not this test's to reap) leave as they exit.
        await asyncio.to_thread(wait_until, lambda: tagged(child.tag) == [], timeout=5)


@pytest.mark.skipif(ENFORCEMENT.processes != "cgroup", reason=ENFORCEMENT.detail)
async def test_a_cgroup_refuses_forks_past_the_process_limit(tmp_path: Path) -> None:
    limits = ProcessLimits(max_rss_bytes=1024 * MIB, max_processes=20)
    async with watched(limits, interval_s=3600) as runner:
        child = await runner.spawn(spec(tmp_path, FORK))
        async with asyncio.timeout(15):
            assert await child.read_line() == b"forked"
        assert child.bounds.breach() is not None
        assert len(tagged(child.tag)) <= 20
        await child.stop(grace_s=0, term_s=0)
        assert tagged(child.tag) == []
