"""Linux process trees read from ``/proc``: parents, groups, memory, start times and tags.

Every function here is synchronous and may read many small files, so the event loop calls
them through ``asyncio.to_thread``. A process identity is ``(pid, starttime)``: ``starttime``
(clock ticks after boot, ``/proc/<pid>/stat`` field 22) never repeats for a reused pid, so a
signal sent through ``signal_verified`` can only reach the process that was recorded.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True, slots=True)
class ProcStat:
    """One line of ``/proc/<pid>/stat``, the fields the gateway uses."""

    pid: int
    ppid: int
    pgrp: int
    state: str
    starttime: int
    rss_bytes: int

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat line, or None once it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcStat(
            pid=pid,
            ppid=int(fields[1]),
            pgrp=int(fields[2]),
            state=fields[0].decode(),
            starttime=int(fields[19]),
            rss_bytes=int(fields[21]) * PAGE_BYTES,
        )
    except (IndexError, ValueError):
        return None


def starttime(pid: int) -> int | None:
    """When ``pid`` started (its identity), or None when there is no such process."""
    stat = read_stat(pid)
    return stat.starttime if stat is not None else None


def snapshot() -> dict[int, ProcStat]:
    """Every process visible in ``/proc`` now."""
    table: dict[int, ProcStat] = {}
    with os.scandir(PROC) as entries:
        for entry in entries:
            if entry.name.isdigit():
                stat = read_stat(int(entry.name))
                if stat is not None:
                    table[stat.pid] = stat
    return table


def children_of(table: Mapping[int, ProcStat]) -> dict[int, list[int]]:
    """Parent pid → child pids."""
    children: dict[int, list[int]] = {}
    for stat in table.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    return children


def subtree(children: Mapping[int, list[int]], roots: Iterable[int]) -> set[int]:
    """``roots`` and every process descending from them by parent pid."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            stack.extend(children.get(pid, ()))
    return seen


def env_value(pid: int, name: str) -> str | None:
    """The value of ``name`` in the process's initial environment, if readable."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = name.encode() + b"="
    for entry in raw.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def tagged(
    table: Mapping[int, ProcStat], name: str, accept: Callable[[str], bool]
) -> dict[int, str]:
    """Processes of ``table`` whose environment variable ``name`` satisfies ``accept``.

    Zombies (whose environment is gone) and unreadable processes are skipped.
    """
    found: dict[int, str] = {}
    for pid, stat in table.items():
        if stat.zombie:
            continue
        value = env_value(pid, name)
        if value is not None and accept(value):
            found[pid] = value
    return found


def signal_verified(pid: int, start: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to ``pid`` only if it is still the process that started at ``start``.

    The pid is pinned with a pidfd before its start time is checked, so a pid reused between
    the check and the signal cannot be hit. Returns whether the signal was sent.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if starttime(pid) != start:
            return False
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, sig)
        return True
    finally:
        os.close(pidfd)
