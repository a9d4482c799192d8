"""How each child's memory and process-count limits are enforced, and what says one broke.

Three mechanisms, chosen once per runner (``Enforcement.choose``) from ``limits.enforcement``:

- ``cgroup`` (app/process/cgroups.py): the kernel holds the child's whole tree to
  ``memory.max`` and ``pids.max`` in a group of its own; used where the gateway may make
  cgroup v2 groups with the ``memory`` and ``pids`` controllers.
- ``rlimit``, for memory only: every process of the tree gets ``RLIMIT_DATA`` (its private
  writable memory) at the limit, so one allocation can never outrun the watchdog; the kernel
  refuses the allocation, and the program usually exits on its own out-of-memory error. A
  child that exits with a failure after one of its processes reached ``_RLIMIT_NEAR`` of the
  limit (its peak resident memory, as ``wait4`` reports it) is reported as ``memory_limit``.
  ``RLIMIT_AS`` is not used: Node reserves far more address space than it uses (Gemini CLI
  does not start under 16 GiB of it). The watchdog still sums the tree.
- ``watchdog`` (app/process/watchdog.py): the tree is sampled from ``/proc`` every
  ``limits.watch_interval_s`` and killed when over; a fast allocation or fork bomb can outrun
  it. The process count has no ``rlimit``: ``RLIMIT_NPROC`` counts every process of the user
  on the host (every root process, for a gateway run as root), not the child's tree.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from app.limits import EnforcementMode
from app.process.cgroups import CgroupParent, ChildGroup, own_group
from app.process.childspec import LimitExceeded, ProcessLimits

log = logging.getLogger(__name__)

Mechanism = Literal["cgroup", "rlimit", "watchdog"]

_RLIMIT_NEAR = 0.9


class EnforcementUnavailable(Exception):
    """``limits.enforcement`` asks for a mechanism this machine does not offer."""


@dataclass(frozen=True, kw_only=True)
class ShimBounds:
    """What the child does to itself before it execs the CLI (app/process/parentdeath.py)."""

    cgroup_procs: str | None = None
    """Write its pid here: join the child's group."""
    data_bytes: int | None = None
    """Set ``RLIMIT_DATA`` (soft and hard) to this."""


@dataclass(frozen=True, kw_only=True)
class ChildBounds:
    """One child's enforcement: what it sets up before exec, and how to tell it broke a limit."""

    group: ChildGroup | None = None
    data_bytes: int | None = None

    @property
    def shim(self) -> ShimBounds:
        return ShimBounds(
            cgroup_procs=None if self.group is None else str(self.group.procs_file),
            data_bytes=self.data_bytes,
        )

    def breach(self) -> LimitExceeded | None:
        """A limit the kernel enforced on the live tree (reads the group's counters)."""
        return None if self.group is None else self.group.breach()

    def breach_at_exit(
        self, returncode: int, peak_rss_bytes: int | None, *, stopped: bool
    ) -> LimitExceeded | None:
        """The limit the child ended on, judged once it has exited; ``stopped``: the gateway
        was stopping it (then a failure status is the gateway's signal, not a refused
        allocation)."""
        found = self.breach()
        if found is not None or self.data_bytes is None or returncode == 0 or stopped:
            return found
        if peak_rss_bytes is not None and peak_rss_bytes >= _RLIMIT_NEAR * self.data_bytes:
            return LimitExceeded(
                reason="memory_limit", limit=self.data_bytes, observed=peak_rss_bytes
            )
        return None

    @property
    def judged_at_exit(self) -> bool:
        """The kernel may stop the child for a limit, which is only known once it exits."""
        return self.group is not None or self.data_bytes is not None

    def kill(self) -> None:
        """SIGKILL every process in the child's group, if it has one."""
        if self.group is not None:
            self.group.kill()

    def release(self) -> None:
        """Kill what is left in the child's group and remove it (blocking; none: nothing)."""
        if self.group is not None:
            self.group.remove()


@dataclass(frozen=True, kw_only=True)
class Enforcement:
    """Which mechanism enforces each limit for every child of a runner, and why."""

    memory: Mechanism
    processes: Mechanism
    detail: str
    """Why these mechanisms (why not a cgroup, when it is not one)."""
    parent: CgroupParent | None = None

    @classmethod
    def choose(
        cls, mode: EnforcementMode, *, parent: CgroupParent | str | None = None
    ) -> Enforcement:
        """The mechanisms for ``mode``; ``parent`` is the cgroup parent (or why there is none),
        probed here when not given. Raises ``EnforcementUnavailable`` for ``cgroup`` without one."""
        if mode in ("watchdog", "rlimit"):
            parent = None
        if mode == "watchdog":
            return cls(
                memory="watchdog", processes="watchdog", detail="limits.enforcement is watchdog"
            )
        if mode in ("auto", "cgroup") and parent is None:
            parent = CgroupParent.prepare(own_group())
        if isinstance(parent, CgroupParent):
            return cls(
                memory="cgroup",
                processes="cgroup",
                detail=f"a cgroup v2 group per child under {parent.path}",
                parent=parent,
            )
        if mode == "cgroup":
            raise EnforcementUnavailable(
                f"limits.enforcement is cgroup but {parent}; delegate a cgroup v2 group with "
                "the memory and pids controllers to the gateway, or set limits.enforcement to auto"
            )
        why = "limits.enforcement is rlimit" if parent is None else f"no cgroup: {parent}"
        return cls(
            memory="rlimit",
            processes="watchdog",
            detail=f"{why}; memory by RLIMIT_DATA per process, processes by the watchdog",
        )

    def for_child(self, tag: str, limits: ProcessLimits) -> ChildBounds:
        """The bounds of a new child tagged ``tag``; raises ``OSError`` without its group."""
        if self.parent is not None:
            group = self.parent.create(
                tag, max_memory_bytes=limits.max_rss_bytes, max_processes=limits.max_processes
            )
            return ChildBounds(group=group)
        if self.memory == "rlimit":
            return ChildBounds(data_bytes=limits.max_rss_bytes)
        return ChildBounds()


WATCHDOG_ONLY = Enforcement(memory="watchdog", processes="watchdog", detail="watchdog only")
"""No kernel enforcement: a runner built without a choice (tests, one-off probes)."""
