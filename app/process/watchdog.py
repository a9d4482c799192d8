"""The process watchdog: memory and process-count limits on every child's whole tree.

Every ``interval_s`` it reads ``/proc`` once (in a thread) and, for each live child of the
runner, takes the child's tree: the child, everything below it by parent pid, and processes
re-parented to the gateway (it is a child subreaper) that carry the child's tag, with their
own descendants. It then

- records the tree's members on the child (``ManagedProcess.descendants``) and in the ledger,
  so ``stop()`` and a later start-up sweep can kill descendants that left the group;
- sums the tree's resident memory and counts its processes, and when either is over
  ``ProcessLimits`` calls ``ManagedProcess.exceed`` (SIGKILL of the group and of every
  recorded descendant; the provider reports the turn as ``resource_limit``) -- except for a
  limit the runner's cgroups enforce (app/process/bounds.py): then the group's own counters
  say whether the kernel refused a fork or killed for memory, and the tree is killed for that;
- reaps adopted descendants that have exited (see ``orphans.reap_adopted``): a zombie child
  of the gateway that is not one the runner spawned, seen in two checks in a row (whoever
  else started a child of the gateway has collected it by then).

Resident memory is summed per process, so pages shared between processes of the tree count
more than once: the limit errs on the side of stopping early.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from app.observability.metrics import GatewayMetrics
from app.process import proctree
from app.process.bounds import Enforcement
from app.process.childspec import LimitExceeded, ProcessLimits
from app.process.managed import ManagedProcess
from app.process.orphans import TAG_ENV, ProcessLedger, become_subreaper, reap_adopted, sweep
from app.process.runner import ProcessRunner
from app.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TreeUsage:
    """One child's tree at one moment."""

    members: dict[int, int]
    """``pid → starttime`` of its live processes, the child included."""
    rss_bytes: int

    @property
    def processes(self) -> int:
        return len(self.members)


def measure(
    roots: Mapping[int, tuple[int | None, str]], gateway_pid: int
) -> tuple[dict[int, TreeUsage], dict[int, proctree.ProcStat]]:
    """Each root's tree usage, and the whole process table; ``roots`` maps pid → (start, tag).

    Synchronous: reads ``/proc``.
    """
    table = proctree.snapshot()
    children = proctree.children_of(table)
    # Processes adopted by the gateway that are not its own children: their tag says whose.
    adopted = {
        pid for pid in children.get(gateway_pid, ()) if pid not in roots and not table[pid].zombie
    }
    by_tag: dict[str, list[int]] = {}
    for pid in adopted:
        value = proctree.env_value(pid, TAG_ENV)
        if value is not None:
            by_tag.setdefault(value, []).append(pid)
    usage: dict[int, TreeUsage] = {}
    for root, (start, tag) in roots.items():
        stat = table.get(root)
        if stat is None or stat.starttime != start:
            continue
        members = proctree.subtree(children, [root, *by_tag.get(tag, ())])
        live = [table[pid] for pid in members if pid in table and not table[pid].zombie]
        usage[root] = TreeUsage(
            members={s.pid: s.starttime for s in live},
            rss_bytes=sum(s.rss_bytes for s in live),
        )
    return usage, table


class ProcessWatchdog:
    """Checks the runner's children against its limits every ``interval_s``."""

    def __init__(self, runner: ProcessRunner, *, interval_s: float, reap: bool) -> None:
        self.runner = runner
        self.interval_s = interval_s
        self.reap = reap
        """Reap exited adopted descendants (set when the gateway is a child subreaper)."""
        self._zombies: set[int] = set()

    async def run(self) -> None:
        """Check forever; a failed check is logged and the next one runs on time."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check()
            except Exception:
                log.exception("process watchdog check failed")

    async def check(self) -> None:
        """One look at every child's tree: record, enforce, reap."""
        children = {c.pid: c for c in self.runner.live if c.returncode is None}
        roots = {pid: (c.start_ticks, c.tag) for pid, c in children.items()}
        usage, table = await asyncio.to_thread(measure, roots, os.getpid())
        breaches = await asyncio.to_thread(
            lambda: {pid: c.bounds.breach() for pid, c in children.items()}
        )
        for pid, tree in usage.items():
            child = children[pid]
            if child.returncode is not None or child.exceeded is not None:
                continue
            child.descendants.update({p: s for p, s in tree.members.items() if p != pid})
            if child.peak_rss_bytes is None or tree.rss_bytes > child.peak_rss_bytes:
                child.peak_rss_bytes = tree.rss_bytes
            breach = breaches.get(pid)
            if breach is not None:
                child.exceed(breach)
            else:
                self._enforce(child, tree)
        self.runner.sync_ledger()
        if self.reap:
            me = os.getpid()
            zombies = {pid for pid, s in table.items() if s.ppid == me and s.zombie}
            seen_before, self._zombies = self._zombies, zombies
            if not self.runner.spawning:
                stale = {pid: table[pid] for pid in zombies & seen_before}
                reaped = reap_adopted(stale, self.runner.owned_pids())
                if reaped:
                    log.debug("reaped adopted processes %s", reaped)

    def _enforce(self, child: ManagedProcess, tree: TreeUsage) -> None:
        limits, by = self.runner.limits, self.runner.enforcement
        if (
            limits.max_rss_bytes is not None
            and by.memory != "cgroup"
            and tree.rss_bytes > limits.max_rss_bytes
        ):
            child.exceed(
                LimitExceeded(
                    reason="memory_limit", limit=limits.max_rss_bytes, observed=tree.rss_bytes
                )
            )
        elif (
            limits.max_processes is not None
            and by.processes != "cgroup"
            and tree.processes > limits.max_processes
        ):
            child.exceed(
                LimitExceeded(
                    reason="process_limit", limit=limits.max_processes, observed=tree.processes
                )
            )


async def supervised_runner(
    settings: Settings, *, metrics: GatewayMetrics | None = None
) -> tuple[ProcessRunner, ProcessWatchdog]:
    """The gateway's runner and watchdog, after sweeping what earlier instances left behind.

    Sweeps ``storage.data_dir`` (see ``orphans.sweep``) before anything is spawned, makes this
    process a child subreaper, and applies ``limits.*`` to every child, enforced as
    ``limits.enforcement`` says (raises ``EnforcementUnavailable`` when it cannot be).
    """
    data_dir = settings.storage.data_dir
    await asyncio.to_thread(sweep, data_dir)
    subreaper = become_subreaper()
    limits = settings.limits
    enforcement = await asyncio.to_thread(Enforcement.choose, limits.enforcement)
    log.info(
        "memory limit by %s, process limit by %s (%s)",
        enforcement.memory,
        enforcement.processes,
        enforcement.detail,
    )
    runner = ProcessRunner(
        limits=ProcessLimits(
            max_line_bytes=limits.max_line_bytes,
            max_rss_bytes=limits.max_process_rss_bytes,
            max_processes=limits.max_process_count,
        ),
        ledger=ProcessLedger(data_dir),
        metrics=metrics,
        enforcement=enforcement,
    )
    return runner, ProcessWatchdog(runner, interval_s=limits.watch_interval_s, reap=subreaper)
