"""What every benchmark shares: the gateway under test, /proc readings, statistics, results.

The gateway is the real one (``python -m app serve``: uvicorn, loopback sockets, a SQLite file
migrated by Alembic), started by the test suite's harness with ``benchmarks/fake_agent.py``
as its ``claude``. Each benchmark returns a ``Section``: rows for its tables, targets it is
reported against (never asserted), and notes saying exactly what was measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.gateway import FakeGateway, fake_gateway_at
from tests.gateway import TOKEN

AGENT_SOURCE = Path(__file__).resolve().parent / "fake_agent.py"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

BENCH_LIMITS: dict[str, Any] = {
    # The defaults protect a shared machine from one client; a benchmark is that one client.
    "session_creates_per_minute": 1_000_000,
    "max_open_sessions_per_key": 1_000_000,
    "max_subscribers_per_session": 5000,
    "max_subscribers": 10000,
    "max_live_processes": 256,
}


# --- results -------------------------------------------------------------------------------


@dataclass
class Target:
    """One goal from the brief, the value measured against it, and whether it was met."""

    name: str
    goal: str
    value: str
    met: bool | None


@dataclass
class Table:
    title: str
    rows: list[dict[str, Any]]


@dataclass
class Section:
    name: str
    title: str
    measures: str
    tables: list[Table] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


# --- statistics ----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0-100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def ms(ns: float) -> float:
    return round(ns / 1e6, 3)


def ratio(value: float, floor: float) -> float:
    return round(value / floor, 3) if floor else float("nan")


# --- /proc ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (not its children), from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid``, from ``/proc/<pid>/statm``."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (by parent pid, scanned from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_rss(pids: Sequence[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += rss_bytes(pid)
    return total


class CpuMeter:
    """CPU seconds a process used between ``start()`` and ``stop()``, and its share of a core."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._cpu = 0.0
        self._wall = 0.0
        self.cpu_s = 0.0
        self.wall_s = 0.0

    def start(self) -> None:
        self._cpu, self._wall = cpu_seconds(self.pid), time.monotonic()

    def stop(self) -> None:
        self.cpu_s = cpu_seconds(self.pid) - self._cpu
        self.wall_s = time.monotonic() - self._wall

    @property
    def core_share(self) -> float:
        return round(self.cpu_s / self.wall_s, 3) if self.wall_s else float("nan")


# --- the gateway under test ----------------------------------------------------------------


def install_agent(directory: Path) -> Path:
    """``benchmarks/fake_agent.py`` as ``directory/claude``, run by this interpreter with
    ``-I -S`` (no site-packages: the agent needs only the standard library)."""
    directory.mkdir(parents=True, exist_ok=True)
    executable = directory / "claude"
    source = AGENT_SOURCE.read_text().split("\n", 1)[1]
    executable.write_text(f"#!{sys.executable} -IS\n{source}")
    executable.chmod(0o755)
    return executable


@contextlib.contextmanager
def scratch(prefix: str, *, base: str | None = None) -> Iterator[Path]:
    """A temporary directory (on ``base``, e.g. ``/dev/shm``; default the system's)."""
    with tempfile.TemporaryDirectory(prefix=f"agbench-{prefix}-", dir=base) as path:
        yield Path(path)


def bench_gateway(base: Path, **overrides: Any) -> FakeGateway:
    """A gateway (not started) under ``base`` whose ``claude`` is the benchmark agent."""
    agent = install_agent(base / "agent")
    sections: dict[str, Any] = {"limits": dict(BENCH_LIMITS), "server": {"limit_concurrency": 5000}}
    claude: dict[str, Any] = {"executable": str(agent), "env": {}}
    for key, value in overrides.items():
        if key == "claude_code":
            claude.update(value)
        else:
            sections.setdefault(key, {}).update(value)
    return fake_gateway_at(base, claude_code=claude, **sections)


@contextlib.asynccontextmanager
async def running(gateway: FakeGateway) -> AsyncIterator[Api]:
    """Start ``gateway`` (in a thread: the harness is synchronous), yield its API, stop it."""
    await asyncio.to_thread(gateway.start)
    try:
        async with Api(gateway) as api:
            yield api
    finally:
        await asyncio.to_thread(gateway.stop)


class Api:
    """The few calls the benchmarks make, over one pooled httpx client."""

    def __init__(self, gateway: FakeGateway) -> None:
        self.gateway = gateway
        self.port = gateway.port
        self.http = httpx.AsyncClient(
            base_url=gateway.base_url,
            headers=AUTH,
            timeout=40.0,  # past the gateway's 30 s SQLite busy timeout
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=200),
        )

    async def __aenter__(self) -> Api:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    @property
    def pid(self) -> int:
        assert self.gateway.process is not None
        return self.gateway.process.pid

    async def create_session(self, **body: Any) -> str:
        response = await self.http.post(
            "/v1/sessions", json={"workspace": str(self.gateway.workspace), **body}
        )
        response.raise_for_status()
        session_id: str = response.json()["id"]
        return session_id

    async def delete_session(self, session_id: str) -> None:
        response = await self.http.delete(f"/v1/sessions/{session_id}")
        response.raise_for_status()

    async def last_seq(self, session_id: str) -> int:
        response = await self.http.get(
            f"/v1/sessions/{session_id}/events", params={"after": 0, "limit": 1}
        )
        response.raise_for_status()
        last: int = response.json()["last_seq"]
        return last

    async def start_turn(self, session_id: str, prompt: str, *, limit_s: float = 60.0) -> str:
        """POST a turn; while the previous one is still finishing (409), try again."""
        deadline = time.monotonic() + limit_s
        while True:
            response = await self.http.post(
                f"/v1/sessions/{session_id}/turns", json={"prompt": prompt}
            )
            if response.status_code != 409 or time.monotonic() > deadline:
                response.raise_for_status()
                turn_id: str = response.json()["id"]
                return turn_id
            await asyncio.sleep(0.005)

    async def wait_turn(self, session_id: str, turn_id: str, *, limit_s: float = 300.0) -> str:
        """Poll until the turn has ended; return its status."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            response = await self.http.get(f"/v1/sessions/{session_id}/turns/{turn_id}")
            response.raise_for_status()
            status: str = response.json()["status"]
            if status in {"completed", "failed", "interrupted"}:
                return status
            await asyncio.sleep(0.02)
        raise TimeoutError(f"turn {turn_id} did not end within {limit_s} s")

    async def session(self, session_id: str) -> dict[str, Any]:
        response = await self.http.get(f"/v1/sessions/{session_id}")
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    async def run_turn(self, session_id: str, prompt: str) -> str:
        turn_id = await self.start_turn(session_id, prompt)
        return await self.wait_turn(session_id, turn_id)
