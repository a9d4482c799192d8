"""The end-of-run check (tests/leftovers.py) finds every kind of process a run can leave."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.process import proctree
from app.process.orphans import TAG_ENV, data_dir_id
from tests import leftovers
from tests.gateway import wait_until

RUN = "999999999-1"
"""A run id no pytest process has."""


@pytest.fixture
def orphans() -> Iterator[list[int]]:
    started: list[int] = []
    yield started
    for pid in started:
        if (start := proctree.starttime(pid)) is not None:
            proctree.signal_verified(pid, start)


@contextlib.contextmanager
def stand_in_root() -> Iterator[tuple[int, int]]:
    """``(root, child)``: a shell standing in for the run's root process, and its ``sleep``.

    Not this test's own process: earlier tests may have made pytest a child subreaper (the
    gateway makes itself one), so orphans land under it, and it has session-wide servers as
    descendants that the check must neither report nor kill here."""
    script = "sleep 1000 >/dev/null 2>&1 & echo $!; wait"
    with subprocess.Popen(["sh", "-c", script], cwd="/", stdout=subprocess.PIPE) as root:
        assert root.stdout is not None
        child = int(root.stdout.readline())
        try:
            yield root.pid, child
        finally:
            if (start := proctree.starttime(child)) is not None:
                proctree.signal_verified(child, start)
            root.kill()


def orphan(started: list[int], *, cwd: Path, env: dict[str, str]) -> int:
    """A ``sleep`` whose parent has exited: re-parented away from this test's process."""
    out = subprocess.run(
        ["sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!"],
        cwd=cwd,
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        check=True,
    )
    pid = int(out.stdout)
    started.append(pid)
    return pid


def test_t30_the_check_finds_marked_tagged_and_temp_dir_processes(
    tmp_path: Path, orphans: list[int]
) -> None:
    temp_root = tmp_path / "run"
    data_dir = temp_root / "gateway" / "data"
    (data_dir / "processes").mkdir(parents=True)
    elsewhere = Path("/")
    marked = orphan(orphans, cwd=elsewhere, env={leftovers.RUN_ENV: RUN})
    tagged = orphan(orphans, cwd=elsewhere, env={TAG_ENV: f"{data_dir_id(data_dir)}.1-2.1"})
    working = orphan(orphans, cwd=temp_root, env={})
    other_run = orphan(orphans, cwd=elsewhere, env={leftovers.RUN_ENV: "1-1"})
    other_dir = orphan(orphans, cwd=tmp_path, env={TAG_ENV: f"{data_dir_id(tmp_path)}.1-2.1"})
    with stand_in_root() as (root, child):
        found = leftovers.find(root_pid=root, run=RUN, temp_root=temp_root)
    assert {marked, tagged, working, child} <= found.keys()
    assert "sleep 1000" in found[marked]
    assert not {other_run, other_dir} & found.keys()


def test_t30_collect_kills_what_it_reports(tmp_path: Path, orphans: list[int]) -> None:
    marked = orphan(orphans, cwd=tmp_path, env={leftovers.RUN_ENV: RUN})
    start = proctree.starttime(marked)

    with subprocess.Popen(["sleep", "1000"]) as root:  # a root without descendants
        try:
            left = leftovers.collect(root_pid=root.pid, run=RUN, temp_root=None, grace_s=0)
        finally:
            root.kill()

    assert list(left) == [marked]
    wait_until(
        lambda: (s := proctree.read_stat(marked)) is None or s.zombie or s.starttime != start
    )
