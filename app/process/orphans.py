"""Processes that outlive their gateway: the ledger, the start-up sweep, and the subreaper.

Every child the runner starts carries ``AGENT_GATEWAY_PROCESS=<data dir>.<owner>.<n>`` in its
environment (inherited by its tools and their children), where ``<owner>`` is the gateway
instance's ``<pid>-<starttime>``. Each instance also keeps a ledger,
``<data_dir>/processes/<owner>.json``, of the ``(pid, starttime)`` of its children and of every
descendant the watchdog has seen, which covers a descendant that cleared its environment.

A gateway killed with SIGKILL leaves both behind. At start-up ``sweep`` kills, for the same
data directory, every process recorded in the ledger of an instance that is no longer running
(matched by start time, so a reused pid is never hit) and every process tagged by such an
instance, with their descendants; then it deletes those ledgers.

While it runs, the gateway is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a descendant
whose parent exits (``setsid`` daemons, double forks) is re-parented to the gateway instead of
to init, so it stays in the gateway's tree where the watchdog and ``stop()`` find it.
``reap_adopted`` collects the exit status of such adopted processes, by pid, never touching
the children the event loop's own watcher waits for.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
from collections.abc import Collection, Mapping
from pathlib import Path

from app.process import proctree

log = logging.getLogger(__name__)

TAG_ENV = "AGENT_GATEWAY_PROCESS"
"""The environment variable that marks a child, and everything it starts, as the gateway's."""

_PR_SET_CHILD_SUBREAPER = 36


def data_dir_id(data_dir: Path) -> str:
    """A short stable name for a data directory (instances sharing it sweep each other)."""
    return hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]


def instance_id(pid: int | None = None) -> str:
    """``<pid>-<starttime>`` of a process (this one by default): unique for the machine's uptime."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{proctree.starttime(pid)}"


def _instance_running(owner: str) -> bool:
    pid, _, start = owner.partition("-")
    if not pid.isdigit() or not start.isdigit():
        return False
    return proctree.starttime(int(pid)) == int(start)


class ProcessLedger:
    """This instance's record of the processes it is responsible for, rewritten on change."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / "processes"
        self.owner = instance_id()
        self.tag_prefix = f"{data_dir_id(data_dir)}.{self.owner}."
        """What every child's ``TAG_ENV`` value starts with."""
        self.path = self.directory / f"{self.owner}.json"
        self._written: dict[int, int] | None = None

    def write(self, processes: Mapping[int, int]) -> None:
        """Record ``pid → starttime`` for every process still ours (atomic, skipped if same)."""
        entries = dict(processes)
        if entries == self._written:
            return
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps({str(pid): start for pid, start in entries.items()}))
            temporary.replace(self.path)
        except OSError as exc:  # a full or read-only disk must not stop the CLIs
            log.warning("cannot write the process ledger %s: %s", self.path, exc)
            return
        self._written = entries

    def discard(self) -> None:
        """Remove the ledger once every process in it has been stopped (clean shutdown)."""
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._written = None


def sweep(data_dir: Path) -> list[int]:
    """Kill what earlier, no longer running gateway instances on ``data_dir`` left behind.

    Returns the pids that were sent SIGKILL. Synchronous: call it through a thread.
    """
    table = proctree.snapshot()
    roots: dict[int, int] = {}
    directory = data_dir / "processes"
    ledgers = sorted(directory.glob("*.json")) if directory.is_dir() else []
    for ledger in ledgers:
        if _instance_running(ledger.stem):
            continue
        try:
            entries = {
                int(pid): int(start) for pid, start in json.loads(ledger.read_text()).items()
            }
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("ignoring an unreadable process ledger %s: %s", ledger, exc)
            entries = {}
        for pid, start in entries.items():
            stat = table.get(pid)
            if stat is not None and stat.starttime == start:
                roots[pid] = start
            if stat is None or stat.starttime == start:
                # The group the recorded leader led, if members remain after it exited.
                roots.update({s.pid: s.starttime for s in table.values() if s.pgrp == pid})
        with contextlib.suppress(OSError):
            ledger.unlink()
    prefix = data_dir_id(data_dir) + "."

    def left_behind(value: str) -> bool:
        parts = value.split(".")
        return value.startswith(prefix) and len(parts) == 3 and not _instance_running(parts[1])

    for pid in proctree.tagged(table, TAG_ENV, left_behind):
        roots[pid] = table[pid].starttime
    members = proctree.subtree(proctree.children_of(table), roots)
    spared = {os.getpid(), os.getppid(), 1}
    killed = [
        pid
        for pid in sorted(members - spared)
        if pid in table
        and not table[pid].zombie
        and proctree.signal_verified(pid, table[pid].starttime)
    ]
    if killed:
        log.warning(
            "killed %d processes left behind by an earlier gateway: %s", len(killed), killed
        )
    return killed


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process; False where Linux says no."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
            return True
        error = ctypes.get_errno()
    except (OSError, AttributeError) as exc:
        log.warning("cannot become a child subreaper: %s", exc)
        return False
    log.warning("cannot become a child subreaper: %s", os.strerror(error))
    return False


def reap_adopted(table: Mapping[int, proctree.ProcStat], owned: Collection[int]) -> list[int]:
    """Collect adopted descendants that have exited; never a pid in ``owned``.

    ``owned`` are the children the runner spawned and the event loop waits for: reaping one of
    those would steal its exit status. Only exact pids are waited for, never ``-1``.
    """
    me = os.getpid()
    reaped = []
    for pid, stat in table.items():
        if stat.ppid == me and stat.zombie and pid not in owned:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    reaped.append(pid)
    return reaped


def child_tree(
    root: int, start: int | None, tag: str, recorded: Mapping[int, int]
) -> dict[int, int]:
    """``pid → starttime`` of the live processes of a child's tree, the child itself included.

    Roots: the child (if still the same process), processes tagged with its ``tag`` and the
    recorded descendants that are still the same processes; then everything below them.
    """
    table = proctree.snapshot()
    roots = {pid for pid in recorded if pid in table and table[pid].starttime == recorded[pid]}
    if root in table and table[root].starttime == start:
        roots.add(root)
    roots.update(proctree.tagged(table, TAG_ENV, lambda value: value == tag))
    members = proctree.subtree(proctree.children_of(table), roots) - {os.getpid()}
    return {pid: table[pid].starttime for pid in members if pid in table and not table[pid].zombie}
