"""Processes a test run leaves behind: found when the run ends, killed, and reported.

A live process belongs to the run when it

- descends from the pytest process (by parent pid);
- carries ``RUN_ENV=<run id>`` in its environment: set before the first test, it is inherited
  by every process a test starts, the gateways included (the CLIs they start get an
  allow-listed environment without it);
- carries a gateway's ``AGENT_GATEWAY_PROCESS`` tag for a data directory under the run's temp
  directory: every CLI and shared server, and what they start, even once re-parented to init;
- works in a directory under the run's temp directory.

One pass over ``/proc``; runs belonging to other pytest processes on the machine have other
run ids and other temp directories, so they are never touched.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

from app.process import proctree
from app.process.orphans import TAG_ENV, data_dir_id

RUN_ENV = "AGENT_GATEWAY_TEST_RUN"
"""The variable that marks a process as started by this test run."""

_MAX_DEPTH = 5
"""How deep under the temp directory gateway data directories are looked for."""


def run_id(pid: int | None = None) -> str:
    """``<pid>-<starttime>`` of the pytest process: unique for the machine's uptime."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{proctree.starttime(pid)}"


def _data_dirs(root: Path) -> Iterator[Path]:
    """Gateway data directories under ``root``: those with a process ledger directory."""
    for directory, names, _ in os.walk(root):
        depth = len(Path(directory).relative_to(root).parts)
        if "processes" in names:
            yield Path(directory)
        if depth >= _MAX_DEPTH:
            names.clear()
        else:
            names[:] = [n for n in names if not n.startswith(".") and n != "node_modules"]


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def find(*, root_pid: int, run: str, temp_root: Path | None) -> dict[int, str]:
    """``pid → why and what`` for every live process of the run, ``root_pid`` excluded."""
    table = proctree.snapshot()
    mine = proctree.subtree(proctree.children_of(table), [root_pid]) - {root_pid}
    temp = str(temp_root.resolve()) if temp_root is not None else None
    prefixes = tuple(f"{data_dir_id(d)}." for d in _data_dirs(temp_root)) if temp_root else ()
    found: dict[int, str] = {}
    for pid, stat in table.items():
        if stat.zombie or pid == root_pid:
            continue
        if pid in mine:
            why = "a descendant of the test run"
        elif proctree.env_value(pid, RUN_ENV) == run:
            why = f"started with {RUN_ENV}"
        elif prefixes and (proctree.env_value(pid, TAG_ENV) or "").startswith(prefixes):
            why = "a child of one of the run's gateways"
        elif temp and (_cwd(pid) + "/").startswith(temp + "/"):
            why = "working in the run's temp directory"
        else:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue  # gone meanwhile
        found[pid] = f"{why}: {cmdline.decode(errors='replace').strip()[:200]}"
    return found


def collect(
    *, root_pid: int, run: str, temp_root: Path | None, grace_s: float = 3.0
) -> dict[int, str]:
    """The run's processes still alive after ``grace_s`` (ones exiting are given that long),
    each killed with SIGKILL; empty when none is left."""
    deadline = time.monotonic() + grace_s
    while found := find(root_pid=root_pid, run=run, temp_root=temp_root):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)  # polling processes that are exiting; bounded by the grace
    table = proctree.snapshot()
    for pid in found:
        if pid in table:
            proctree.signal_verified(pid, table[pid].starttime)
    return found
