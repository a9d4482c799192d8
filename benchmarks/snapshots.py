"""The cost of recording a workspace at every turn's start and end, on 10,000 files."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

from app.process.snapshots import SnapshotStore
from app.process.snapshots.store import turn_ref
from benchmarks.harness import Api, Section, Table, Target, bench_gateway, running, scratch
from benchmarks.settings import RunConfig
from benchmarks.spawn import bucket_quantile, lag_buckets

FILES = 10_000
DIRECTORIES = 100
CHANGED = 10
"""Files rewritten between two turns, as an agent's edits would."""
MEASURES = (
    f"A workspace of {FILES:,} files ({DIRECTORIES} directories, 1-4 KiB of text each, about "
    "25 MB) in a temporary directory. Floor: what Git itself takes for the same record, "
    "`git add -A` then `git write-tree` in a fresh repository with the workspace as its work "
    "tree (started with `subprocess.run`, i.e. vfork, from a worker thread: the cheapest "
    "start Python has), first on the whole tree (every file hashed) and then after "
    f"{CHANGED} files were rewritten (Git's index skips the unchanged ones). Store: the "
    "gateway's snapshot store (app/process/snapshots/) recording the same tree under a ref: "
    "`git diff-files` and `git ls-files --others` (what changed since its last record), the "
    "size cap checked on those, `git update-index` of exactly those files, `git write-tree`, "
    "`git update-ref` (the first record measures the whole workspace first); then listing "
    "what changed between two records (one `git diff-tree`). Gateway: one session on that "
    f"workspace, each turn the benchmark agent's `fake reply` with {CHANGED} files rewritten "
    "before it, timed by the turn's own `created_at` → `finished_at` (the turn records the "
    "workspace at its start and end), snapshots on and off (`snapshots.enabled = false`), "
    "with the gateway's event-loop lag probe sampling every 5 ms "
    "(`agent_gateway_event_loop_lag_seconds`, read before and after the turns). Git "
    "processes per turn: the same turns with `snapshots.git` pointing at a wrapper that "
    "counts its runs. Medians of the repetitions; the first turn (the whole tree hashed) "
    "apart."
)
LAG = "agent_gateway_event_loop_lag_seconds_bucket"
COUNTING_GIT = """#!/bin/sh
echo "$1 $2 $3 $4" >> {log}
exec {git} "$@"
"""


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


def _git(work_tree: Path, git_dir: Path, *args: str) -> None:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "GIT_DIR": str(git_dir),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    if args[0] != "init":
        env["GIT_WORK_TREE"] = str(work_tree)
    git = shutil.which("git") or "git"
    subprocess.run(  # noqa: S603 - a fixed Git command line
        [git, *args], cwd=work_tree, env=env, stdout=subprocess.DEVNULL, check=True
    )


def _plain_record(workspace: Path, git_dir: Path) -> float:
    started = time.perf_counter()
    _git(workspace, git_dir, "add", "-A")
    _git(workspace, git_dir, "write-tree")
    return (time.perf_counter() - started) * 1000


async def floor(base: Path, workspace: Path, rounds: int) -> tuple[float, float]:
    """Plain Git: ms for the whole tree, then the median ms after ``CHANGED`` edits."""
    git_dir = base / "floor.git"
    await asyncio.to_thread(_git, workspace, git_dir, "init", "-q", "--bare")
    first = await asyncio.to_thread(_plain_record, workspace, git_dir)
    later = []
    for round_ in range(rounds):
        touch(workspace, 1000 + round_)
        later.append(await asyncio.to_thread(_plain_record, workspace, git_dir))
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


@dataclass(frozen=True, kw_only=True)
class Turns:
    """A gateway's turns on a workspace: the first turn's ms, the median of the others,
    the event loop's lag over the others (p99 and the largest bucket reached, ms), and
    how many Git processes the others ran (with the counting Git only)."""

    first_ms: float
    later_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    git_runs: list[str] | None = None


async def gateway_turns(base: Path, *, enabled: bool, rounds: int, counting: bool = False) -> Turns:
    """A gateway's turns on a fresh copy of the workspace."""
    snapshots: dict[str, Any] = {"enabled": enabled}
    log = base / "git-runs.log"
    if counting:
        snapshots["git"] = str(_counting_git(base, log))
    gateway = bench_gateway(base, snapshots=snapshots, server={"loop_lag_probe_s": 0.005})
    make_workspace(gateway.workspace)
    times = []
    async with running(gateway) as api:
        session = await api.create_session()
        times.append(await _timed_turn(api, session))
        runs_before = _lines(log)
        lag_before = await lag_buckets(api)
        for round_ in range(rounds):
            touch(gateway.workspace, 3000 + round_)
            times.append(await _timed_turn(api, session))
        lag_after = await lag_buckets(api)
        runs = _lines(log)[len(runs_before) :] if counting else None
    return Turns(
        first_ms=times[0],
        later_ms=median(times[1:]),
        lag_p99_ms=bucket_quantile(lag_before, lag_after, 99),
        lag_max_ms=bucket_quantile(lag_before, lag_after, 100),
        git_runs=runs,
    )


def _counting_git(base: Path, log: Path) -> Path:
    """A ``git`` that logs each run's first arguments to ``log``, then runs Git."""
    base.mkdir(parents=True, exist_ok=True)
    wrapper = base / "counting-git"
    wrapper.write_text(COUNTING_GIT.format(log=log, git=shutil.which("git")))
    wrapper.chmod(0o755)
    return wrapper


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


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
        off = await gateway_turns(base / "off", enabled=False, rounds=rounds)
        on = await gateway_turns(base / "on", enabled=True, rounds=rounds)
        counted = await gateway_turns(base / "counted", enabled=True, rounds=3, counting=True)
    measured: list[tuple[str, float | None, float]] = [
        ("floor: git add -A + write-tree", floor_first, floor_later),
        ("store: one record", store_first, store_later),
        ("store: what changed between two records", None, listing),
        ("gateway turn, snapshots off", off.first_ms, off.later_ms),
        ("gateway turn, snapshots on", on.first_ms, on.later_ms),
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
    overhead = on.later_ms - off.later_ms
    runs = counted.git_runs or []
    per_turn = len(runs) / 3
    section.tables.append(
        Table(
            title="per turn, snapshots on - off (a record at the start and at the end)",
            rows=[
                {
                    "turn": "first (whole tree)",
                    "added ms": round(on.first_ms - off.first_ms, 1),
                    "floor ms (two plain records)": round(2 * floor_first, 1),
                },
                {
                    "turn": f"later ({CHANGED} files changed before it)",
                    "added ms": round(overhead, 1),
                    "floor ms (two plain records)": round(2 * floor_later, 1),
                },
            ],
        )
    )
    section.tables.append(
        Table(
            title="the gateway's event loop during the later turns (lag probe every 5 ms)",
            rows=[
                {
                    "snapshots": name,
                    "lag p99 ms ≤": turns.lag_p99_ms,
                    "lag max ms ≤": turns.lag_max_ms,
                }
                for name, turns in (("off", off), ("on", on))
            ],
        )
    )
    commands = Counter(run.split(" ")[2] if run.startswith("-c ") else run for run in runs)
    section.tables.append(
        Table(
            title=f"Git processes per turn (3 turns, {CHANGED} files changed before each)",
            rows=[
                {"git command": command, "runs per turn": round(count / 3, 2)}
                for command, count in sorted(commands.items())
            ]
            + [{"git command": "all", "runs per turn": round(per_turn, 2)}],
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
            value=f"{overhead:.0f} ms (two plain records: {2 * floor_later:.0f} ms)",
            met=overhead <= 250,
        ),
        Target(
            name="event-loop lag p99 during turns that record the workspace",
            goal="< 10 ms",
            value=f"≤ {on.lag_p99_ms:g} ms (snapshots off: ≤ {off.lag_p99_ms:g} ms)",
            met=on.lag_p99_ms < 10,
        ),
    ]
    return section
