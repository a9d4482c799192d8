"""Control groups (v2) for the children: one per child, with its memory and process limits.

Where the gateway may make control groups of its own -- the cgroup v2 hierarchy has the
``memory`` and ``pids`` controllers and the gateway's own group (``/proc/self/cgroup``) lets it
create a child group with both enabled -- every child runs in ``<own group>/agent-gateway/<tag>``
with ``memory.max`` (the tree's memory, page cache included), ``memory.swap.max`` 0,
``memory.oom.group`` 1 (an out-of-memory kill takes the whole group) and ``pids.max``. The
child joins it itself, before it execs the CLI (app/process/parentdeath.py), so nothing it
starts is ever outside it.

The kernel enforces both limits: an allocation over ``memory.max`` ends in an out-of-memory
kill, a ``fork`` over ``pids.max`` fails. ``ChildGroup.breach`` reads the counters that say it
did (``memory.events`` ``oom_kill``, ``pids.events`` ``max``) so the turn is reported as
``resource_limit``; ``ChildGroup.remove`` kills what is left (``cgroup.kill``) and removes the
group once it is empty.

Note ``pids.max`` counts threads as well as processes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from app.process.childspec import LimitExceeded

log = logging.getLogger(__name__)

CONTROLLERS = ("memory", "pids")
PARENT_NAME = "agent-gateway"
_EMPTY_WAIT_S = 1.0
_EMPTY_POLL_S = 0.01


def own_group(
    mountinfo: Path = Path("/proc/self/mountinfo"), membership: Path = Path("/proc/self/cgroup")
) -> Path | None:
    """This process's cgroup v2 directory, or None without a cgroup v2 mount."""
    mount: Path | None = None
    with contextlib.suppress(OSError):
        for line in mountinfo.read_text().splitlines():
            fields = line.split(" - ", 1)
            if len(fields) == 2 and fields[1].split(" ", 1)[0] == "cgroup2":
                mount = Path(fields[0].split()[4])
                break
    if mount is None:
        return None
    with contextlib.suppress(OSError):
        for line in membership.read_text().splitlines():
            if line.startswith("0::"):
                return mount / line[3:].lstrip("/")
    return None


def _controllers(path: Path) -> set[str]:
    return set((path / "cgroup.controllers").read_text().split())


def _enable(path: Path) -> None:
    """Enable ``CONTROLLERS`` for ``path``'s children."""
    enabled = set((path / "cgroup.subtree_control").read_text().split())
    missing = [name for name in CONTROLLERS if name not in enabled]
    if missing:
        (path / "cgroup.subtree_control").write_text(" ".join(f"+{n}" for n in missing))


@dataclass(frozen=True, kw_only=True)
class CgroupParent:
    """The group the children's groups are made in, with ``CONTROLLERS`` enabled for them."""

    path: Path

    @classmethod
    def prepare(cls, own: Path | None) -> CgroupParent | str:
        """The parent under ``own`` (made if needed), or why there can be none."""
        if own is None:
            return "no cgroup v2 hierarchy is mounted"
        try:
            available = _controllers(own)
        except OSError as exc:
            return f"cannot read {own}/cgroup.controllers: {exc.strerror}"
        missing = [name for name in CONTROLLERS if name not in available]
        if missing:
            return (
                f"the gateway's cgroup {own} is not delegated the {' and '.join(missing)} "
                f"controller{'s' if len(missing) > 1 else ''}"
            )
        parent = own / PARENT_NAME
        try:
            _enable(own)
            parent.mkdir(exist_ok=True)
            _enable(parent)
        except OSError as exc:
            # EBUSY: the gateway's own group holds processes, so it cannot give controllers
            # to groups below it (cgroup v2's "no internal processes" rule).
            return f"cannot make {parent} with {'+'.join(CONTROLLERS)}: {exc.strerror or exc}"
        return cls(path=parent)

    def create(
        self, tag: str, *, max_memory_bytes: int | None, max_processes: int | None
    ) -> ChildGroup:
        """A new group for the child tagged ``tag``, its limits written; raises ``OSError``."""
        path = self.path / tag.replace("/", "_")
        path.mkdir()
        try:
            if max_memory_bytes is not None:
                (path / "memory.max").write_text(str(max_memory_bytes))
                with contextlib.suppress(FileNotFoundError):  # no swap accounting
                    (path / "memory.swap.max").write_text("0")
                (path / "memory.oom.group").write_text("1")
            if max_processes is not None:
                (path / "pids.max").write_text(str(max_processes))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise
        return ChildGroup(path=path, max_memory_bytes=max_memory_bytes, max_processes=max_processes)


def _counter(path: Path, name: str) -> int:
    """The value of ``name`` in a flat-keyed file such as ``memory.events`` (0 if absent)."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return 0


def _number(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().split()[0])
    return 0


@dataclass(frozen=True, kw_only=True)
class ChildGroup:
    """One child's group and the limits written into it."""

    path: Path
    max_memory_bytes: int | None
    max_processes: int | None

    @property
    def procs_file(self) -> Path:
        """The file a process writes its pid to, to join the group."""
        return self.path / "cgroup.procs"

    def breach(self) -> LimitExceeded | None:
        """The limit the kernel has enforced on this group so far, if any (reads its files)."""
        if self.max_memory_bytes is not None and _counter(self.path / "memory.events", "oom_kill"):
            peak = _number(self.path / "memory.peak") or self.max_memory_bytes
            return LimitExceeded(reason="memory_limit", limit=self.max_memory_bytes, observed=peak)
        if self.max_processes is not None and _counter(self.path / "pids.events", "max"):
            # A fork was refused at the limit: the group holds as many as it may.
            observed = max(_number(self.path / "pids.current"), self.max_processes + 1)
            return LimitExceeded(
                reason="process_limit", limit=self.max_processes, observed=observed
            )
        return None

    def kill(self) -> None:
        """SIGKILL every process in the group (``cgroup.kill``, Linux 5.14; else nothing)."""
        with contextlib.suppress(OSError):
            fd = os.open(self.path / "cgroup.kill", os.O_WRONLY)  # never created here
            try:
                os.write(fd, b"1")
            finally:
                os.close(fd)

    def remove(self) -> None:
        """Kill what is left in the group and remove it (waits up to ``_EMPTY_WAIT_S``).

        Blocking; a group that stays busy is left behind and logged.
        """
        self.kill()
        deadline = time.monotonic() + _EMPTY_WAIT_S
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if time.monotonic() >= deadline:
                    log.warning("cannot remove the cgroup %s: %s", self.path, exc.strerror)
                    return
            # Killed processes leave the group as they exit, within milliseconds.
            time.sleep(_EMPTY_POLL_S)
