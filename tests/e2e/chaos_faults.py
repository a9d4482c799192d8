"""What the chaos suite does to the processes around the replicas, and what it watches there.

- ``CliSampler``: a thread that lists the Claude Code CLIs under a directory every ~20 ms
  (from ``/proc``) and keeps, per workspace (the CLI's working directory), the most that were
  running at once: "two CLIs on one thread" is a peak above one.
- ``freeze`` / ``thaw``: SIGSTOP a replica and every process under it, as a paused VM or
  container is frozen, and SIGCONT them all again.
- ``AnswerThief``: on the test's own Redis connection, makes a forwarded command's answer get
  lost: it deletes every ``agw:answer:*`` list the moment it is pushed and kills the
  forwarding replica's connection that waits for answers right after the command is pushed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import redis

from app.process import proctree

SAMPLE_PERIOD_S = 0.02
"""How often the sampler lists the CLIs."""
RECHECK_S = 1.0
"""A process younger than this (seen by the sampler) has its command line read again: between
``vfork`` and ``exec`` a child still shows its parent's."""
STOPPED = frozenset({"T", "t"})
NOT_WRITES = frozenset({"del", "expire", "expired", "evicted", "persist"})
"""Keyspace events that put nothing into a key."""
WAITING = frozenset({"b", "P"})
"""``CLIENT LIST`` flags of a connection that waits: blocked in a command, or subscribed."""
GONE = frozenset({"Z", "X"})


def cli_cwd(pid: int, executable: str, under: str) -> str | None:
    """The working directory of ``pid`` if it is a Claude Code CLI (or the parent-death shim
    about to become one, which carries the CLI's command line) working under ``under``; not
    the bwrap processes of its sandbox (nor the shim about to become bwrap), which carry
    that command line too."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    names = {a.decode(errors="replace") for a in argv}
    if executable not in names or "--input-format" not in names:
        return None
    if any(Path(name).name == "bwrap" for name in names):
        return None
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    return cwd if (cwd + "/").startswith(under + "/") else None


def launcher(ppid: int) -> int:
    """The replica that started a CLI whose parent is ``ppid``: above the bwrap processes of
    its sandbox, if any."""
    while True:
        try:
            argv0 = Path(f"/proc/{ppid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            return ppid
        stat = proctree.read_stat(ppid)
        if Path(argv0.decode(errors="replace")).name != "bwrap" or stat is None:
            return ppid
        ppid = stat.ppid


def cli_processes(root: Path, executable: str) -> dict[int, str]:
    """Every live CLI working under ``root`` now: pid → workspace."""
    under = str(root.resolve())
    found: dict[int, str] = {}
    for pid, stat in proctree.snapshot().items():
        if stat.zombie:
            continue
        cwd = cli_cwd(pid, executable, under)
        if cwd is not None:
            found[pid] = cwd
    return found


def reap_clis(root: Path, executable: str, timeout: float = 15.0) -> dict[int, str]:
    """The CLIs still alive under ``root`` after ``timeout`` (those exiting are given that
    long), each killed; empty when none is left."""
    deadline = time.monotonic() + timeout
    while (left := cli_processes(root, executable)) and time.monotonic() < deadline:
        time.sleep(0.1)  # processes that are exiting; bounded by the deadline
    for pid in left:
        start = proctree.starttime(pid)
        if start is not None:
            proctree.signal_verified(pid, start)
            thaw([pid])
    return left


@dataclass
class Seen:
    """A process the sampler listed: when first, and for a CLI its workspace and parent."""

    pid: int
    first: float
    cwd: str | None
    ppid: int = 0


class CliSampler:
    """Samples the CLIs working under ``root`` until ``stop``; ``peak(workspace)`` is the most
    that were running (not stopped, not exited) at once."""

    def __init__(self, root: Path, executable: str) -> None:
        self.under = str(root.resolve())
        self.executable = executable
        self.samples = 0
        self._seen: dict[int, Seen] = {}
        self._clis: dict[int, Seen] = {}
        self._peaks: dict[str, int] = {}
        self._crowded: dict[str, list[int]] = {}
        self._now: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cli-sampler", daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "the CLI sampler did not stop"

    def peak(self, workspace: Path) -> int:
        with self._lock:
            return self._peaks.get(str(workspace.resolve()), 0)

    def crowded(self, workspace: Path) -> list[int]:
        """The pids of the first sample that saw more than one CLI running in ``workspace``."""
        with self._lock:
            return list(self._crowded.get(str(workspace.resolve()), []))

    def running(self, workspace: Path) -> list[int]:
        """The CLIs running in ``workspace`` at the latest sample."""
        with self._lock:
            return list(self._now.get(str(workspace.resolve()), []))

    def clis(self, workspace: Path) -> list[Seen]:
        """Every CLI seen running in ``workspace`` so far, with its parent (the replica that
        started it) and when it was first seen."""
        cwd = str(workspace.resolve())
        with self._lock:
            return [seen for seen in self._clis.values() if seen.cwd == cwd]

    def wait_sample(self, timeout: float = 5.0) -> None:
        """Return once a sample taken after this call is done."""
        target = self.samples + 2
        deadline = time.monotonic() + timeout
        while self.samples < target:
            assert time.monotonic() < deadline, "the CLI sampler took no sample"
            time.sleep(SAMPLE_PERIOD_S)  # waits for the sampler thread; bounded by the deadline

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_PERIOD_S):
            self._sample()

    def _sample(self) -> None:
        now = time.monotonic()
        with os.scandir("/proc") as entries:
            pids = {int(e.name) for e in entries if e.name.isdigit()}
        for pid in set(self._seen) - pids:
            del self._seen[pid]
        running: dict[str, list[int]] = {}
        for pid in pids:
            seen = self._seen.get(pid)
            if seen is None or (seen.cwd is None and now - seen.first < RECHECK_S):
                cwd = cli_cwd(pid, self.executable, self.under)
                seen = self._seen[pid] = Seen(pid=pid, first=seen.first if seen else now, cwd=cwd)
            if seen.cwd is None:
                continue
            stat = proctree.read_stat(pid)
            if stat is None or stat.state in STOPPED or stat.state in GONE:
                continue
            if not seen.ppid:
                seen.ppid = launcher(stat.ppid)
                with self._lock:
                    self._clis[pid] = seen
            running.setdefault(seen.cwd, []).append(pid)
        with self._lock:
            for cwd, found in running.items():
                if len(found) > self._peaks.get(cwd, 0):
                    self._peaks[cwd] = len(found)
                if len(found) > 1:
                    self._crowded.setdefault(cwd, sorted(found))
            self._now = running
            self.samples += 1


# --- a frozen replica -----------------------------------------------------------------------


def descendants(pid: int) -> set[int]:
    """``pid`` and every live process under it."""
    table = proctree.snapshot()
    return {p for p in proctree.subtree(proctree.children_of(table), [pid]) if p in table}


def freeze(pid: int) -> list[int]:
    """SIGSTOP ``pid`` and then every process under it, again until no new one shows up (a
    child started meanwhile); the stopped pids, ``pid`` first."""
    stopped = [pid]
    os.kill(pid, signal.SIGSTOP)
    while fresh := sorted(descendants(pid) - set(stopped)):
        for child in fresh:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGSTOP)
        stopped += fresh
    return stopped


def thaw(pids: list[int]) -> None:
    """SIGCONT every one of ``pids`` (those gone meanwhile are skipped)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def alive(pid: int) -> bool:
    stat = proctree.read_stat(pid)
    return stat is not None and not stat.zombie


# --- a lost answer --------------------------------------------------------------------------


def _socket_addrs(pid: int, port: int) -> set[str]:
    """``127.0.0.1:<local port>`` of ``pid``'s TCP connections to ``port`` (as Redis's
    ``CLIENT LIST`` names a client's ``addr``)."""
    inodes = set()
    with contextlib.suppress(OSError), os.scandir(f"/proc/{pid}/fd") as fds:
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(fd.path)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    addrs = set()
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.split(":")[1], 16) == port:
                addrs.add(f"127.0.0.1:{int(local.split(':')[1], 16)}")
    return addrs


@dataclass
class AnswerThief:
    """While entered: every ``agw:answer:*`` pushed is deleted at once, and right after a
    command is pushed to ``agw:commands:<owner>`` the ``forwarder``'s connection waiting for
    answers is killed (``CLIENT KILL ID``).

    That connection is the one named ``agw:<forwarder>:waiting`` (``CLIENT SETNAME``). A
    gateway that names none has its connections found by their sockets (``forwarder_pid``):
    then each one blocked in a command after the push that was not blocked before it is
    killed. So that the kill comes before the answer, whatever the machine's load, the owner
    (its gateway process alone, ``owner_pid``) is held with SIGSTOP from the moment the thief
    is entered until that kill (at most ``HOLD_S``): a pause far below the lease's TTL."""

    url: str
    redis_port: int
    owner: str
    owner_pid: int
    forwarder: str
    forwarder_pid: int
    deleted: list[str] = field(default_factory=list)
    killed: list[dict[str, Any]] = field(default_factory=list)
    pushed_at: float | None = None
    owner_held_s: float | None = None
    errors: list[str] = field(default_factory=list)

    HOLD_S = 1.5

    def __post_init__(self) -> None:
        self._redis = redis.Redis.from_url(self.url, decode_responses=True, socket_timeout=5)
        self._stop = threading.Event()
        self._pushed = threading.Event()
        self._threads = [
            threading.Thread(target=self._guarded(self._listen), name="thief-listen"),
            threading.Thread(target=self._guarded(self._kill), name="thief-kill"),
        ]
        self._pubsub = self._redis.pubsub()  # type: ignore[no-untyped-call]
        self._blocked_before: set[str] = set()
        self._held_at = 0.0

    def __enter__(self) -> Self:
        self._redis.config_set("notify-keyspace-events", "KEA")
        self._pubsub.psubscribe("__keyspace@0__:agw:*")
        deadline = time.monotonic() + 5
        while (message := self._pubsub.get_message(timeout=0.5)) is None or message[
            "type"
        ] != "psubscribe":
            assert time.monotonic() < deadline, "no keyspace subscription"
        self._blocked_before = {c["id"] for c in self._forwarders_blocked()}
        os.kill(self.owner_pid, signal.SIGSTOP)
        self._held_at = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._release_owner()
        for thread in self._threads:
            thread.join(timeout=10)
        stuck = [t.name for t in self._threads if t.is_alive()]
        with contextlib.suppress(redis.RedisError):
            self._redis.config_set("notify-keyspace-events", "")
        self._pubsub.close()
        self._redis.close()
        assert not stuck, f"the answer thief's threads did not stop: {stuck}"

    def _release_owner(self) -> None:
        if self.owner_held_s is None:
            self.owner_held_s = time.monotonic() - self._held_at
            thaw([self.owner_pid])

    def _guarded(self, work: Any) -> Any:
        def run() -> None:
            try:
                work()
            except Exception as exc:  # reported by the test, never lost in a thread
                self.errors.append(repr(exc))
            finally:
                self._release_owner()

        return run

    def _forwarders_blocked(self) -> list[dict[str, Any]]:
        """The forwarder's connections blocked in a command now, found by their sockets."""
        addrs = _socket_addrs(self.forwarder_pid, self.redis_port)
        clients: list[dict[str, Any]] = self._redis.client_list()
        return [c for c in clients if c["addr"] in addrs and "b" in c["flags"]]

    def _listen(self) -> None:
        commands = f"__keyspace@0__:agw:commands:{self.owner}"
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.05)
            if message is None or message["type"] != "pmessage" or message["data"] in NOT_WRITES:
                continue
            channel: str = message["channel"]
            if channel == commands:
                self.pushed_at = time.monotonic()
                self._pushed.set()
            elif channel.startswith("__keyspace@0__:agw:answer:"):
                key = channel.removeprefix("__keyspace@0__:")
                if self._redis.delete(key):
                    self.deleted.append(key)

    def _kill(self) -> None:
        while not self._pushed.wait(0.01):
            if self._stop.is_set() or time.monotonic() - self._held_at > self.HOLD_S:
                return
        name = f"agw:{self.forwarder}:waiting"
        began = time.monotonic()
        while (waited := time.monotonic() - began) < self.HOLD_S and not self._stop.is_set():
            clients = self._redis.client_list()
            if any(c.get("name", "").startswith(f"agw:{self.forwarder}:") for c in clients):
                # Killed once it waits (blocked, or subscribed), or after half a second anyway.
                named = [c for c in clients if c.get("name") == name]
                targets = [c for c in named if WAITING & set(c["flags"]) or waited > 0.5]
            else:
                targets = [
                    c for c in self._forwarders_blocked() if c["id"] not in self._blocked_before
                ]
            for client in targets:
                self._redis.client_kill_filter(_id=client["id"])
                self.killed.append({"after_push_s": time.monotonic() - began, **client})
            if targets:
                return
            time.sleep(0.002)  # polls Redis for the connection to wait; bounded by the loop


@contextlib.contextmanager
def sampling(root: Path, executable: str) -> Iterator[CliSampler]:
    sampler = CliSampler(root, executable).start()
    try:
        yield sampler
    finally:
        sampler.stop()
