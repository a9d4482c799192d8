"""Process trees (T11/R10): escapees found at stop, and the start-up sweep of a dead instance."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.process import proctree
from app.process.childspec import ProcessSpec, child_environment
from app.process.orphans import TAG_ENV, ProcessLedger, data_dir_id, instance_id, sweep
from app.process.runner import ProcessRunner

pytestmark = pytest.mark.uvloop

DEAD_OWNER = "999999999-1"
"""An instance id no process has: pid max is far below it."""

ESCAPE = """
import os, sys
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "1000"])
    os._exit(0)
os.waitpid(child, 0)
print("started", flush=True)
sys.stdin.read()
"""


def escapees_of(tag: str) -> list[int]:
    table = proctree.snapshot()
    return sorted(proctree.tagged(table, TAG_ENV, lambda value: value == tag))


async def test_t11_stop_kills_a_setsid_escapee_whose_parent_already_exited(
    tmp_path: Path,
) -> None:
    runner = ProcessRunner()
    script = tmp_path / "escape.py"
    script.write_text(textwrap.dedent(ESCAPE))
    env = child_environment(os.environ, passthrough=(), overlay={})
    process = await runner.spawn(
        ProcessSpec(argv=(sys.executable, str(script)), cwd=tmp_path, env=env)
    )
    assert await process.read_line() == b"started"
    [escapee] = [pid for pid in escapees_of(process.tag) if pid != process.pid]
    assert proctree.read_stat(escapee).pgrp != process.pid  # type: ignore[union-attr]
    await runner.aclose(grace_s=0.5)
    # SIGKILL was sent; the escapee is not our child, so poll until the kernel has ended it.
    async with asyncio.timeout(5):
        while (stat := proctree.read_stat(escapee)) is not None and not stat.zombie:  # noqa: ASYNC110
            await asyncio.sleep(0.01)


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def sleeper(started: list[subprocess.Popen[bytes]], tag: str | None = None) -> int:
    env = {**os.environ, TAG_ENV: tag} if tag else dict(os.environ)
    process = subprocess.Popen(["sleep", "1000"], env=env, start_new_session=True)
    started.append(process)
    return process.pid


def killed(started: list[subprocess.Popen[bytes]], pid: int) -> bool:
    [process] = [p for p in started if p.pid == pid]
    try:
        return process.wait(timeout=5) == -9
    except subprocess.TimeoutExpired:
        return False


def test_t11_r3_the_sweep_kills_what_a_dead_instance_left_and_spares_reused_pids(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    data_dir = tmp_path / "data"
    prefix = data_dir_id(data_dir)
    recorded = sleeper(sleepers)
    reused = sleeper(sleepers)  # its pid is in the ledger, with another start time
    tagged = sleeper(sleepers, tag=f"{prefix}.{DEAD_OWNER}.1")
    running_owner = sleeper(sleepers, tag=f"{prefix}.{instance_id()}.1")
    other_dir = sleeper(sleepers, tag=f"{data_dir_id(tmp_path / 'other')}.{DEAD_OWNER}.1")
    ledgers = data_dir / "processes"
    ledgers.mkdir(parents=True)
    entries = {recorded: proctree.starttime(recorded), reused: 1}
    (ledgers / f"{DEAD_OWNER}.json").write_text(json.dumps(entries))

    swept = sweep(data_dir)

    assert sorted(swept) == sorted([recorded, tagged])
    assert killed(sleepers, recorded)
    assert killed(sleepers, tagged)
    for spared in (reused, running_owner, other_dir):
        assert proctree.read_stat(spared) is not None
        assert not proctree.read_stat(spared).zombie  # type: ignore[union-attr]
    assert not (ledgers / f"{DEAD_OWNER}.json").exists()


async def test_the_ledger_follows_the_runners_children(tmp_path: Path) -> None:
    ledger = ProcessLedger(tmp_path)
    runner = ProcessRunner(ledger=ledger)
    env = child_environment(os.environ, passthrough=(), overlay={})
    process = await runner.spawn(ProcessSpec(argv=("sleep", "1000"), cwd=tmp_path, env=env))
    assert process.tag.startswith(ledger.tag_prefix)
    assert json.loads(ledger.path.read_text()) == {str(process.pid): process.start_ticks}
    await runner.aclose(grace_s=0)
    assert not ledger.path.exists()
    # A live instance's children are never swept, even by a sweep of the same directory.
    assert ledger.owner == instance_id()


def test_t30_the_sweep_kills_the_group_of_a_recorded_leader_that_died_first(
    tmp_path: Path,
) -> None:
    """A shared server that got its parent-death signal leaves the members of its group
    (the kernel signals only the direct child): the next start sweeps them by group."""
    with subprocess.Popen(
        ["sh", "-c", "sleep 1000 & sleep 1000 & echo ready; wait"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    ) as leader:
        assert leader.stdout is not None
        assert leader.stdout.readline() == b"ready\n"
        table = proctree.snapshot()
        members = sorted(s.pid for s in table.values() if s.pgrp == leader.pid)
        members.remove(leader.pid)
        assert len(members) == 2
        ledgers = tmp_path / "data" / "processes"
        ledgers.mkdir(parents=True)
        recorded = {leader.pid: proctree.starttime(leader.pid)}
        (ledgers / f"{DEAD_OWNER}.json").write_text(json.dumps(recorded))
        leader.kill()
        leader.wait()

        assert sorted(sweep(tmp_path / "data")) == members
    for pid in members:  # orphans now: whoever adopted them reaps them
        deadline = time.monotonic() + 5
        while (stat := proctree.read_stat(pid)) is not None and not stat.zombie:
            assert time.monotonic() < deadline, f"pid {pid} survived the sweep"
            time.sleep(0.01)
