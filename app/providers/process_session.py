"""A session that runs its own CLI process, as Claude Code and every ACP agent do.

The process is spawned on a turn's demand (``_spawn``), followed by one task that reads its
output or waits for its end (``Running.follower``), and stopped when the session is suspended
or closed, when the turn goes idle, or when an interrupt is not heeded in time (``_release``).
A turn is: refuse it on a closed session, make sure a process runs (``_ensure_process``, the
CLI's own start and handshake), give up before the prompt when an interrupt came first, then
send the prompt (``_prompt``) and follow the turn loop under the output limit (``_follow``).

A subclass says how its CLI is started and talked to; the plumbing is the same for all.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import abstractmethod
from collections.abc import Callable, Collection, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from app.events import FailureKind, TurnError
from app.process.childspec import ProcessSpec
from app.process.managed import ManagedProcess, SpawnError
from app.process.runner import ProcessRunner
from app.providers.base import ProcessInfo, SessionSpec, ThreadSession, TurnHooks, TurnOutcome
from app.providers.exits import limit_error, spawn_error
from app.providers.sandboxing import Sandbox
from app.providers.turnloop import TurnLoop, failure
from app.settings import LimitsSettings, ProviderSettings

BEFORE_PROMPT = "interrupted by the client before the prompt was sent"


@dataclass(eq=False, kw_only=True)
class Running:
    """A spawned process, the task that follows it and what ``/v1/sessions`` shows of it."""

    process: ManagedProcess
    follower: asyncio.Task[None]
    info: ProcessInfo

    @property
    def serves(self) -> bool:
        """Still usable for a turn: the process runs and its follower has not ended."""
        return self.process.returncode is None and not self.follower.done()


class SessionHost(Protocol):
    """What a process session needs of its provider (``hosting.HostedProvider`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> ProviderSettings: ...

    @property
    def limits(self) -> LimitsSettings: ...

    @property
    def runner(self) -> ProcessRunner: ...

    @property
    def workspace_roots(self) -> tuple[Path, ...] | None: ...

    @property
    def sandbox(self) -> Sandbox: ...

    def forget(self, session: Any, /) -> None:
        """The session closed itself."""


L = TypeVar("L", bound=Running)
T = TypeVar("T")


class ProcessSession(ThreadSession, Generic[L, T]):
    """One gateway session on a CLI it runs on its own; ``L`` is its running process, ``T``
    what its turn loop follows."""

    def __init__(self, *, host: SessionHost, spec: SessionSpec, cli: str) -> None:
        super().__init__(spec)
        self._host = host
        self._name = host.name
        self._cli = cli
        self._live: L | None = None
        self._spawns = 0
        self._loop: TurnLoop[T] | None = None

    @property
    def process(self) -> ProcessInfo | None:
        live = self._live
        if live is None or live.process.returncode is not None:
            return None
        return live.info

    # --- what a CLI says --------------------------------------------------------------------

    @abstractmethod
    async def _ensure_process(self, hooks: TurnHooks) -> L | TurnOutcome:
        """The running process for the next turn, started (and hand-shaken) if needed."""

    @abstractmethod
    async def _prompt(self, live: L, prompt: str, loop: TurnLoop[T]) -> TurnOutcome:
        """Send ``prompt`` and follow the turn to its outcome (``_follow``)."""

    @abstractmethod
    async def _handle(self, live: L, loop: TurnLoop[T], item: T) -> TurnOutcome | None:
        """One item the CLI sent during the turn; the outcome when it ends the turn."""

    def _turn_begins(self) -> None:
        """Called as a turn starts, before anything is spawned."""

    def _turn_ended(self) -> None:
        """Called as a turn ends, however it ends."""

    def _stop_grace_s(self) -> float:
        """How long a stopped process may take to exit after its stdin closes."""
        return self._host.settings.stop_grace_s

    async def _disconnect(self, live: L) -> None:
        """Called once ``live``'s process is stopped, before its follower is cancelled."""

    # --- process lifecycle ------------------------------------------------------------------

    async def _serving(self) -> L | None:
        """The process when it can take a turn; one that cannot is released first."""
        live = self._live
        if live is not None and live.serves:
            return live
        if live is not None:
            await self._release(live)
        return None

    async def _spawn(
        self,
        argv: Collection[str],
        env: Mapping[str, str],
        follow: Callable[[ManagedProcess], Coroutine[Any, Any, None]],
        *,
        task: str,
    ) -> tuple[ManagedProcess, asyncio.Task[None], ProcessInfo] | TurnOutcome:
        """Spawn the CLI in the session's workspace (confined to the provider's roots) and
        start ``follow`` on it; a failed spawn is the turn's outcome."""
        host = self._host
        confinement, env = host.sandbox.confine(
            session_id=self._spec.session_id,
            workspace=self._spec.workspace,
            executable=next(iter(argv)),
            env=env,
            git_dir=self._spec.git_dir,
        )
        try:
            process = await host.runner.spawn(
                ProcessSpec(
                    argv=tuple(argv),
                    cwd=self._spec.workspace,
                    env=env,
                    confine_to=host.workspace_roots,
                    label=self._name,
                    sandbox=confinement,
                )
            )
        except SpawnError as exc:
            error = spawn_error(exc, cli=self._cli, provider=self._name)
            return TurnOutcome(status="failed", error=error)
        self._spawns += 1
        follower = asyncio.create_task(follow(process), name=f"{task}:{process.pid}")
        info = ProcessInfo(pid=process.pid, started_at=process.started_at, spawns=self._spawns)
        return process, follower, info

    def _exceeded(self, process: ManagedProcess) -> TurnError | None:
        """The limit ``process`` broke (and was killed for), if it broke one."""
        if process.exceeded is None:
            return None
        return limit_error(process.exceeded, cli=self._cli, provider=self._name)

    async def _release(self, live: L, *, at_once: bool = False) -> None:
        """Stop ``live``'s process and its follower; the next turn spawns a new one. With
        ``at_once`` the process is killed without waiting for it to exit on its own."""
        if self._live is live:
            self._live = None
        if at_once:
            await live.process.stop(grace_s=0, term_s=0)
        else:
            await live.process.stop(grace_s=self._stop_grace_s())
        await self._disconnect(live)
        live.follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await live.follower

    def _failed(self, kind: FailureKind, message: str, *, retryable: bool = False) -> TurnOutcome:
        return failure(self._name, kind, message, retryable=retryable)

    # --- turns ------------------------------------------------------------------------------

    async def run_turn(self, prompt: str, hooks: TurnHooks) -> TurnOutcome:
        loop: TurnLoop[T] = TurnLoop(
            provider=self._name, cli=self._cli, settings=self._host.settings, hooks=hooks
        )
        self._loop = loop
        self._turn_begins()
        try:
            return await self._run_turn(prompt, loop)
        finally:
            self._loop = None
            self._turn_ended()

    async def _run_turn(self, prompt: str, loop: TurnLoop[T]) -> TurnOutcome:
        if self._closed:
            return self._failed("invalid_request", "the session is closed")
        live = await self._ensure_process(loop.hooks)
        if isinstance(live, TurnOutcome):
            return live
        if loop.interrupted:
            # Asked while the process was starting: the prompt is never sent.
            return loop.interrupted_outcome(BEFORE_PROMPT)
        return await self._prompt(live, prompt, loop)

    @contextlib.contextmanager
    def _output_limited(self, live: L) -> Iterator[None]:
        """The turn's output budget (``limits.max_turn_output_bytes``) while the block runs."""
        live.process.limit_output(self._host.limits.max_turn_output_bytes)
        try:
            yield
        finally:
            live.process.limit_output(None)

    async def _follow(self, live: L, loop: TurnLoop[T], inbox: asyncio.Queue[T]) -> TurnOutcome:
        """Follow the turn's ``inbox`` to its outcome; an idle turn, or an interrupt not heeded
        in time, releases the process."""

        async def handle(item: T) -> TurnOutcome | None:
            return await self._handle(live, loop, item)

        async def release() -> None:
            await self._release(live)

        return await loop.run(
            inbox,
            handle,
            on_idle=release,
            on_interrupt_expired=release,
            activity=lambda: live.process.last_output_at,
        )

    async def suspend(self) -> None:
        live = self._live
        if live is not None:
            await self._release(live)

    async def close(self, *, at_once: bool = False) -> None:
        self._closed = True
        live = self._live
        if live is not None:
            await self._release(live, at_once=at_once)
        self._host.forget(self)
