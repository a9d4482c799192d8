"""The lifecycle every agent server follows (Codex's ``app-server``, ``opencode serve``).

    (none) ──first need──► spawn ─► the server's own handshake ─► up ──ends / stopped──► down
                                                                  ▲                       │
                                                                  └────── next need ──────┘

A server is started on the first need (a turn, a health ping: ``ensure``), once, under a
lock; after it has ended or been stopped (for not answering, or by ``stop``: its session went
idle), the next need starts a new one (``generation`` counts the starts, reported as
``ProcessInfo.spawns``). ``aclose`` stops it for good: later needs fail with
``ServerUnavailable``.

Where it runs is its ``Placement``:

- shared (the sandbox is off): one process serves every session of its provider. Shared by
  every workspace, it runs from ``/`` and each request names its own directory;
- one session's own (the provider's sandbox is on): the process runs inside that session's
  bubblewrap sandbox (``Sandbox.confine``), started in its workspace (checked against the
  workspace roots) with the session's own home. A shared server cannot be sandboxed: it would
  have to see every session's workspace and keep every session's threads and login in one
  CLI home, which is exactly what the sandbox must not show one session of another.

A subclass says how its server is started and talked to (``_start``), when it counts as up
(``_alive``), what sessions get from it (``_handle``: a JSON-RPC client, an HTTP API), how an
ended one is let go before the next start (``_retire``) and how it is stopped (``_shut``).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from app.process.childspec import ProcessSpec
from app.process.managed import ManagedProcess, ProcessError, SpawnError
from app.process.runner import ProcessRunner
from app.process.sandbox import Confinement
from app.providers.base import ProcessInfo
from app.providers.sandboxing import Sandbox

log = logging.getLogger(__name__)


class ServerUnavailable(Exception):
    """The server could not be started (``missing``: the executable does not exist)."""

    def __init__(self, message: str, *, missing: bool = False, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.missing = missing
        self.stderr_tail = stderr_tail


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where a server process runs: by default from ``/``, unconfined, shared by every session;
    with ``sandbox``, inside the sandbox of ``session_id``, started in ``workspace``."""

    sandbox: Sandbox | None = None
    session_id: str = ""
    workspace: Path | None = None
    """The session's workspace, its working directory; None: its home (a health probe)."""
    roots: tuple[Path, ...] | None = None
    """The roots ``workspace`` must still lie in when the server starts."""
    git_dir: Path | None = None
    """The Git directory of the repository ``workspace`` is a worktree of (writable)."""

    @property
    def confined(self) -> bool:
        return self.sandbox is not None and self.sandbox.on


SHARED = Placement()


@dataclass(eq=False, kw_only=True)
class Up:
    """One started server process; ``generation`` counts the starts, this one included."""

    process: ManagedProcess
    generation: int
    watcher: asyncio.Task[None] | None = None


U = TypeVar("U", bound=Up)
H = TypeVar("H")


class SharedServer(ABC, Generic[U, H]):
    """Starts the server once, watches it, restarts it on the next need after it ended, and
    stops it for good on ``aclose``; ``placement`` says whose it is and what it sees."""

    title: ClassVar[str]
    """How logs and errors name the server (``the Codex app-server``)."""
    owner: ClassVar[str]
    """The CLI the provider drives (``Codex``), for ``the Codex provider is shut down``."""
    label: ClassVar[str]
    """The provider's name, the label of its process."""

    def __init__(
        self, *, runner: ProcessRunner, stop_grace_s: float, placement: Placement = SHARED
    ) -> None:
        self._runner = runner
        self.placement = placement
        self._stop_grace_s = stop_grace_s
        self._up: U | None = None
        self._lock = asyncio.Lock()
        self._generation = 0
        self._closed = False

    @property
    def info(self) -> ProcessInfo | None:
        """The running server process, if any; ``spawns`` counts its starts."""
        up = self._up
        if up is None or not self._alive(up):
            return None
        return ProcessInfo(
            pid=up.process.pid, started_at=up.process.started_at, spawns=up.generation
        )

    async def ensure(self) -> H:
        """What sessions talk to the live server through, starting the server if needed.

        Raises ``ServerUnavailable`` when it cannot be started (or is shut down).
        """
        async with self._lock:
            up = self._up
            if up is not None and self._alive(up):
                return self._handle(up)
            if self._closed:
                raise ServerUnavailable(f"the {self.owner} provider is shut down")
            if up is not None:
                await self._retire(up)
            up = await self._start()
            self._up = up
            return self._handle(up)

    @abstractmethod
    async def ping(self) -> str | None:
        """``None`` when the server answers a cheap request, else why not (starts it: a
        health check is a need)."""

    async def stop(self, *, at_once: bool = False) -> None:
        """Stop the running server, if any; the next need starts a new one. ``at_once``: kill
        it without waiting for it to exit on its own."""
        async with self._lock:
            if self._up is not None:
                await self._shut(self._up, at_once=at_once)

    async def aclose(self, *, at_once: bool = False) -> None:
        """Stop the server for good; later needs fail with ``ServerUnavailable``."""
        self._closed = True
        await self.stop(at_once=at_once)

    # --- what a server says -----------------------------------------------------------------

    @abstractmethod
    def _alive(self, up: U) -> bool:
        """Whether ``up`` still serves."""

    @abstractmethod
    def _handle(self, up: U) -> H:
        """What sessions use to talk to ``up``."""

    @abstractmethod
    async def _start(self) -> U:
        """Spawn (``_spawn``) and hand-shake a new server; raises ``ServerUnavailable``."""

    @abstractmethod
    async def _retire(self, up: U) -> None:
        """Let go of an ended (or unresponsive) server before the next one starts."""

    @abstractmethod
    async def _shut(self, up: U, *, at_once: bool) -> None:
        """Stop the running server (``at_once``: kill it, no grace)."""

    def _confined(self, confinement: Confinement, env: dict[str, str]) -> Confinement:
        """What a sandboxed server sees besides what every agent does (``Sandbox.confine``)."""
        return confinement

    # --- shared steps -----------------------------------------------------------------------

    async def _spawn(self, argv: tuple[str, ...], env: Mapping[str, str]) -> ManagedProcess:
        """Spawn a new server process where ``placement`` says; counts the start.

        Raises ``ServerUnavailable`` (``missing`` when the executable does not exist).
        """
        spec = self._spec(argv, env)
        try:
            process = await self._runner.spawn(spec)
        except SpawnError as exc:
            raise ServerUnavailable(
                f"cannot start {argv[0]}: {exc.detail}", missing=exc.kind == "cli_missing"
            ) from exc
        except ProcessError as exc:  # the runner is closed: the gateway is shutting down
            raise ServerUnavailable(f"cannot start {argv[0]}: {exc}") from exc
        self._generation += 1
        return process

    def _spec(self, argv: tuple[str, ...], env: Mapping[str, str]) -> ProcessSpec:
        """Shared: from ``/``, unconfined. A session's own: in its sandbox, its workspace (or,
        without one, its home) as the working directory."""
        where = self.placement
        if not where.confined:
            return ProcessSpec(argv=argv, cwd=Path("/"), env=env, label=self.label)
        assert where.sandbox is not None
        confinement, inside = where.sandbox.confine(
            session_id=where.session_id,
            workspace=where.workspace,
            executable=argv[0],
            env=env,
            git_dir=where.git_dir,
        )
        assert confinement is not None
        confinement = self._confined(confinement, inside)
        if where.workspace is None:
            home = where.sandbox.home(where.session_id)
            return ProcessSpec(
                argv=argv, cwd=home, env=inside, label=self.label, sandbox=confinement
            )
        return ProcessSpec(
            argv=argv,
            cwd=where.workspace,
            env=inside,
            confine_to=where.roots,
            label=self.label,
            sandbox=confinement,
        )

    async def _reap(self, process: ManagedProcess) -> int | None:
        """Stop a server whose output ended or that exited, and return its exit status.

        Ended output usually means the process is exiting: the grace lets it report its own
        exit status rather than our SIGTERM. The whole process group is stopped, so a wrapper
        (npm's ``codex`` on Node < 22.15 runs the native server as its own child, with our
        pipes) does not leave the real server running and answering.
        """
        grace = self._stop_grace_s
        try:
            return await process.stop(grace_s=grace, term_s=grace)
        except ProcessError:
            return None

    def _ended(self, process: ManagedProcess, how: str) -> None:
        """Log a server that ended by itself (not one stopped on purpose)."""
        if not self._closed:
            log.warning(
                "%s pid=%d ended (%s); the next need restarts it", self.title, process.pid, how
            )
