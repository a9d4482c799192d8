"""The cost of recording a workspace at every turn's start and end, on 10,000 files."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

from app.process.snapshots import SnapshotStore
from app.process.snapshots.store import turn_ref
from benchmarks.harness import Api, Section, Table, Target, bench_gateway, running, scratch
from benchmarks.settings import RunConfig

FILES = 10_000
DIRECTORIES = 100
CHANGED = 10
"""Files rewritten between two turns, as an agent's edits would."""
MEASURES = (
    f"A workspace of {FILES:,} files ({DIRECTORIES} directories, 1-4 KiB of text each, about "
    "25 MB) in a temporary directory. Floor: what Git itself takes for the same record, "
    "`git add -A` then `git write-tree` in a fresh repository with the workspace as its work "
    f"tree, first on the whole tree (every file hashed) and then after {CHANGED} files were "
    "rewritten (Git's index skips the unchanged ones). Store: the gateway's snapshot store "
    "(app/process/snapshots/) recording the same tree under a ref: the size check (`git "
    "ls-files` and one `lstat` a file), `add`, `write-tree`, `commit-tree` and `update-ref`; "
    "then listing what changed between two records. Gateway: one session on that workspace, "
    f"each turn the benchmark agent's `fake reply` with {CHANGED} files rewritten before it, "
    "timed by the turn's own `created_at` → `finished_at` (the turn records the workspace at "
    "its start and end), snapshots on and off (`snapshots.enabled = false`). Medians of the "
    "repetitions; the first turn (the whole tree hashed) apart."
)


def make_workspace(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(FILES):
        directory = root / f"d{i % DIRECTORIES:03d}"
        directory.mkdir(exist_ok=True)
        line = f"file {i}: some source text of a typical length, line after line\n"
        (directory / f"f{i:05d}.txt").write_text(line * (16 + i % 48))


def touch(root: Path, round_: int) -> None:
    """Rewrite ``CHANGED`` files, different ones each round."""
    for k in range(CHANGED):
        i = (round_ * 997 + k * 101) % FILES
        path = root / f"d{i % DIRECTORIES:03d}" / f"f{i:05d}.txt"
        with path.open("a") as file:
            file.write(f"edited in round {round_}\n")


async def _git(work_tree: Path, git_dir: Path, *args: str) -> None:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "GIT_DIR": str(git_dir),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    if args[0] != "init":
        env["GIT_WORK_TREE"] = str(work_tree)
    process = await asyncio.create_subprocess_exec(
        "git", *args, cwd=work_tree, env=env, stdout=asyncio.subprocess.DEVNULL
    )
    assert await process.wait() == 0, args


async def floor(base: Path, workspace: Path, rounds: int) -> tuple[float, float]:
    """Plain Git: ms for the whole tree, then the median ms after ``CHANGED`` edits."""
    git_dir = base / "floor.git"
    await _git(workspace, git_dir, "init", "-q", "--bare")
    started = time.perf_counter()
    await _git(workspace, git_dir, "add", "-A")
    await _git(workspace, git_dir, "write-tree")
    first = (time.perf_counter() - started) * 1000
    later = []
    for round_ in range(rounds):
        touch(workspace, 1000 + round_)
        started = time.perf_counter()
        await _git(workspace, git_dir, "add", "-A")
        await _git(workspace, git_dir, "write-tree")
        later.append((time.perf_counter() - started) * 1000)
    return first, median(later)


async def store(base: Path, workspace: Path, rounds: int) -> tuple[float, float, float]:
    """The snapshot store: ms for the first record, the median record after ``CHANGED``
    edits, and the median listing of what changed between two records."""
    snapshots = SnapshotStore(base / "store")
    started = time.perf_counter()
    previous = await snapshots.record("ses_bench", workspace, turn_ref("trn_0", "start"))
    first = (time.perf_counter() - started) * 1000
    records, listings = [], []
    for round_ in range(rounds):
        touch(workspace, 2000 + round_)
        started = time.perf_counter()
        commit = await snapshots.record("ses_bench", workspace, turn_ref(f"trn_{round_}", "end"))
        records.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        changes = await snapshots.changes("ses_bench", workspace, previous, commit)
        listings.append((time.perf_counter() - started) * 1000)
        assert len(changes.files) == CHANGED, changes
        previous = commit
    return first, median(records), median(listings)


def _turn_ms(turn: dict[str, Any]) -> float:
    created = datetime.fromisoformat(turn["created_at"])
    finished = datetime.fromisoformat(turn["finished_at"])
    return (finished - created).total_seconds() * 1000


async def gateway_turns(base: Path, *, enabled: bool, rounds: int) -> tuple[float, float]:
    """A gateway's turns on a fresh copy of the workspace: the first turn's ms, then the
    median of the next ``rounds``."""
    gateway = bench_gateway(base, snapshots={"enabled": enabled})
    make_workspace(gateway.workspace)
    times = []
    async with running(gateway) as api:
        session = await api.create_session()
        for round_ in range(rounds + 1):
            if round_:
                touch(gateway.workspace, 3000 + round_)
            times.append(await _timed_turn(api, session))
    return times[0], median(times[1:])


async def _timed_turn(api: Api, session: str) -> float:
    turn_id = await api.start_turn(session, "hello")
    status = await api.wait_turn(session, turn_id)
    assert status == "completed", status
    response = await api.http.get(f"/v1/sessions/{session}/turns/{turn_id}")
    response.raise_for_status()
    return _turn_ms(response.json())


async def run(config: RunConfig) -> Section:
    rounds = config.pick(quick=3, full=10)
    section = Section(name="snapshots", title="14. Workspace snapshots", measures=MEASURES)
    with scratch("snapshots") as base:
        workspace = base / "workspace"
        await asyncio.to_thread(make_workspace, workspace)
        floor_first, floor_later = await floor(base, workspace, rounds)
        store_first, store_later, listing = await store(base, workspace, rounds)
        off_first, off_later = await gateway_turns(base / "off", enabled=False, rounds=rounds)
        on_first, on_later = await gateway_turns(base / "on", enabled=True, rounds=rounds)
    measured: list[tuple[str, float | None, float]] = [
        ("floor: git add -A + write-tree", floor_first, floor_later),
        ("store: one record", store_first, store_later),
        ("store: what changed between two records", None, listing),
        ("gateway turn, snapshots off", off_first, off_later),
        ("gateway turn, snapshots on", on_first, on_later),
    ]
    rows: list[dict[str, Any]] = [
        {
            "what": what,
            "first ms": None if first is None else round(first, 1),
            "later ms": round(later, 1),
        }
        for what, first, later in measured
    ]
    section.tables.append(Table(title=f"{FILES:,} files, median of {rounds} turns", rows=rows))
    overhead = on_later - off_later
    section.tables.append(
        Table(
            title="per turn, snapshots on - off (a record at the start and at the end)",
            rows=[
                {
                    "turn": "first (whole tree)",
                    "added ms": round(on_first - off_first, 1),
                },
                {"turn": f"later ({CHANGED} files changed)", "added ms": round(overhead, 1)},
            ],
        )
    )
    factor = store_later / floor_later if floor_later else float("nan")
    section.targets += [
        Target(
            name=f"a record vs plain Git on the same tree ({CHANGED} files changed)",
            goal="<= 3x",
            value=f"{factor:.2f}x",
            met=factor <= 3,
        ),
        Target(
            name=f"time a turn gains from its two records, {FILES:,} files",
            goal="<= 250 ms",
            value=f"{overhead:.0f} ms",
            met=overhead <= 250,
        ),
    ]
    return section
