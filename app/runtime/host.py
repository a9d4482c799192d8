"""One live session's host: the only owner of its live state. It lends the turn it runs,
and failover, a narrow ``TurnContext`` (app/runtime/live.py): the provider, its session
handle, the approvals, the CLI thread.

    launch(turn) ─► task: drive_turn ─► returns how the turn ended (or is cancelled)
                                      ─► the host records it: the turn's row, the session
                                         idle, then the terminal event
                    failed for good ─► failover returns the next provider (Moved), recorded
                                      ─► the host closes the old handle, opens the new one
                                         and goes on with a new coordinator
    interrupt · respond (an approval) · answer (a question) · suspend · stop

The host records the session's status itself: ``running`` with the turn's insert, ``retrying``
and ``awaiting_approval`` while its turn waits, ``idle`` once the turn's end is recorded (just
before the terminal event is told, so a client reacting to it can start the next turn).
``LocalSessions`` (app/runtime/local.py) holds one host per session that has run a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import JsonValue

from app.errors import NoTurnRunning, SessionFenced, StorageUnavailable
from app.events import ChangesSummary, EventData, QuestionAnswer, TurnError
from app.observability.logs import bind_ids
from app.providers.base import (
    ApprovalAnswer,
    ProcessInfo,
    Provider,
    ProviderSession,
    TurnOutcome,
)
from app.records import ApprovalRecord, SessionStatus, TurnRecord
from app.runtime.approvals import ApprovalBroker, Emit
from app.runtime.budgets import Spending
from app.runtime.commands import Issuer
from app.runtime.coordinator import AttemptReporter, RetryPolicy, Sleep, TurnCoordinator
from app.runtime.failover import Moved
from app.runtime.live import TurnContext
from app.runtime.spans import ended
from app.runtime.turns import (
    GATEWAY_SHUTDOWN,
    STORAGE_RETRY_S,
    Hooks,
    Recorder,
    TurnServices,
    drive_turn,
    record_changes,
    record_end,
    stop_cli,
    stopped,
)
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)


FailOver = Callable[
    [TurnContext, TurnCoordinator, TurnRecord, TurnError, int, Sequence[str]],
    Awaitable[Moved | None],
]
"""``(live, coordinator, turn, error, attempts, tried)`` → where the turn goes on, the move
recorded, or None when the failure stands (``Failover.go_on``, app/runtime/failover.py)."""


@dataclass(frozen=True, kw_only=True)
class HostServices:
    """What the hosts of one ``LocalSessions`` share."""

    settings: Settings
    store: Storage
    turns: TurnServices
    providers: Mapping[str, Provider]
    """Where a failed-over session opens its handle on the next provider."""
    clock: Callable[[], datetime]
    sleep: Sleep
    monotonic: Callable[[], float]
    fail_over: FailOver | None = None
    """Choose and record the next provider for a turn that failed for good."""
    fenced: Callable[[str], None] = lambda session_id: None
    """Told when a write for a session was refused because another replica claimed it."""


class SessionHost:
    """The live side of one session: its CLI link, its running turn, its pending requests."""

    def __init__(
        self,
        *,
        services: HostServices,
        session_id: str,
        provider: str,
        handle: ProviderSession,
        thread_id: str | None,
        holder: Issuer,
        model: str | None,
        approval_timeout_s: float,
        workspace: Path | None = None,
        fork_start: dict[str, JsonValue] | None = None,
    ) -> None:
        self._services = services
        self._stopping = False
        """``stop`` has begun: what its turn does from then on changes the status no more."""
        self._quiet = False
        """Stopped because another replica runs the session now: nothing more is written."""
        self._holder = holder
        self._task: asyncio.Task[None] | None = None
        self._coordinator: TurnCoordinator | None = None
        """The running turn's (attempts, retry waits, interrupts); failover replaces it."""
        self._turn_id: str | None = None
        self._busy = False
        self._last_active = time.monotonic()
        self._stop_reason = "interrupted by the client"
        self._context = TurnContext(
            session_id=session_id,
            provider=provider,
            handle=handle,
            approvals=ApprovalBroker(
                session_id=session_id,
                store=services.store,
                timeout_s=approval_timeout_s,
                clock=services.clock,
                on_change=self._pending_changed,
                mask=services.turns.events.mask,
            ),
            thread_id=thread_id,
            model=model,
            workspace=workspace,
            fork_start=fork_start,
        )

    # --- what others may read ---------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._context.session_id

    @property
    def provider(self) -> str:
        """The provider the session runs on now (failover may move it)."""
        return self._context.provider

    @property
    def holder(self) -> Issuer:
        return self._holder

    @property
    def busy(self) -> bool:
        """A turn is running; cleared just before its terminal event is published."""
        return self._busy

    @property
    def turn_id(self) -> str | None:
        """The running (or last) turn."""
        return self._turn_id

    @property
    def thread_id(self) -> str | None:
        return self._context.thread_id

    @property
    def last_active(self) -> float:
        return self._last_active

    @property
    def process(self) -> ProcessInfo | None:
        """The session's own CLI process, while it has one."""
        return self._context.handle.process

    # --- status -------------------------------------------------------------------------------

    async def _set_status(self, status: SessionStatus) -> None:
        services = self._services
        await services.store.update_session(
            self.session_id, status=status, updated_at=services.clock()
        )

    async def _pending_changed(self, pending: int) -> None:
        if self._busy and not self._stopping:
            await self._set_status("awaiting_approval" if pending else "running")

    # --- turns --------------------------------------------------------------------------------

    def launch(
        self, turn: TurnRecord, policy: RetryPolicy, spending: Spending | None = None
    ) -> None:
        """Run ``turn`` in its own task, under the budgets of ``spending``; a turn with
        ``resume_at`` resumes its stored wait for a usage limit's reset, then continues with
        its next attempt."""
        live, services = self._context, self._services
        resumed = turn.resume_at is not None
        self._turn_id = turn.id
        self._busy = True
        self._stop_reason = "interrupted by the client"
        recorder = Recorder(
            services=services.turns,
            live=live,
            turn_id=turn.id,
            set_status=self._set_status,
            attempts=turn.attempts,
            scheduled=resumed,
            spending=spending,
        )
        coordinator = self._coordinator = self._coordinated(
            policy, recorder, first_attempt=turn.attempts + 1, resume_at=turn.resume_at
        )
        # The task copies this context: every line it logs names the session and turn.
        with bind_ids(session_id=live.session_id, turn_id=turn.id, provider=live.provider):
            self._task = asyncio.create_task(
                self._run(turn, coordinator, resumed=resumed), name=f"turn:{turn.id}"
            )

    def _coordinated(
        self,
        policy: RetryPolicy,
        reporter: AttemptReporter,
        *,
        first_attempt: int,
        resume_at: datetime | None = None,
    ) -> TurnCoordinator:
        """A coordinator for the running turn on the session's current handle."""
        services = self._services
        return TurnCoordinator(
            handle=self._context.handle,
            tracer=services.turns.events.tracer,
            traced={"gateway.provider": self._context.provider},
            policy=policy,
            continuation_prompt=services.settings.retry.continuation_prompt,
            turn_timeout_s=services.settings.sessions.turn_timeout_s,
            reporter=reporter,
            sleep=services.sleep,
            monotonic=services.monotonic,
            clock=services.clock,
            first_attempt=first_attempt,
            resume_at=resume_at,
        )

    async def _fail_over(
        self, turn: TurnRecord, error: TurnError, attempts: int, tried: Sequence[str]
    ) -> tuple[TurnCoordinator, str] | None:
        """``drive_turn``'s failover: once failover returns the next provider (the move
        recorded), close the old handle, open the new one on a fresh thread and go on with
        a new coordinator (the turn's record and output budget go on); an interrupt asked
        meanwhile stops the turn instead of the new agent starting."""
        decide, current, live = self._services.fail_over, self._coordinator, self._context
        if decide is None or current is None:
            return None
        moved = await decide(live, current, turn, error, attempts, tried)
        if moved is None:
            return None
        await live.handle.close()
        handle = self._services.providers[moved.provider].open_session(moved.spec)
        live.provider, live.handle, live.thread_id = moved.provider, handle, None
        live.model = moved.spec.model  # what the new agent runs, as the stored session says
        coordinator = self._coordinator = self._coordinated(
            current.policy, current.reporter, first_attempt=attempts + 1
        )
        if current.interrupted:  # asked during the switch: the new agent does not start
            await coordinator.interrupt()
        return coordinator, moved.prompt

    async def resume(
        self, turn: TurnRecord, policy: RetryPolicy, spending: Spending | None = None
    ) -> None:
        """Go on with the turn's stored wait for a usage limit's reset."""
        await self._set_status("retrying")
        self.launch(turn, policy, spending)

    async def _run(self, turn: TurnRecord, coordinator: TurnCoordinator, *, resumed: bool) -> None:
        """The turn as a span: under the span that started it (a request's, a forwarded
        command's), or a trace of its own (a wait resumed after a restart)."""
        live = self._context
        attributes = {
            "gateway.session_id": live.session_id,
            "gateway.turn_id": turn.id,
            "gateway.provider": live.provider,
            "gen_ai.request.model": live.model,
            "gateway.resumed": resumed,
        }
        with self._services.turns.events.tracer.span("turn", attributes):
            await self._drive(turn, coordinator, resumed=resumed)

    async def _drive(
        self, turn: TurnRecord, coordinator: TurnCoordinator, *, resumed: bool
    ) -> None:
        """Drive the turn, then record how it ended; never raises except cancellation."""
        live = self._context
        attempt = max(turn.attempts, 1)
        try:
            driven = await drive_turn(
                self._services.turns,
                live,
                turn,
                coordinator,
                fail_over=self._fail_over,
                resumed=resumed,
            )
        except SessionFenced:
            await self._fenced_out()
            return
        except asyncio.CancelledError:
            if self._quiet:
                raise
            if self._stop_reason == GATEWAY_SHUTDOWN and coordinator.resume_at is not None:
                # Waiting for a usage limit's reset: the wait is stored and the next start of
                # the gateway resumes it, so the turn is not ended here.
                log.info("turn %s keeps its wait for the usage limit's reset", turn.id)
                raise
            changes = await self._changes(turn, attempt)
            await self._end(turn, stopped(self._stop_reason), attempt, changes)
            raise
        changes = await self._changes(turn, driven.attempt)
        for tries in itertools.count():
            try:
                await self._end(turn, driven.outcome, driven.attempt, changes)
                return
            except SessionFenced:
                await self._fenced_out()
                return
            except StorageUnavailable:
                if tries == 0:
                    await stop_cli(live)
                await asyncio.sleep(STORAGE_RETRY_S[min(tries, len(STORAGE_RETRY_S) - 1)])

    async def _changes(self, turn: TurnRecord, attempt: int) -> ChangesSummary | None:
        """Record the workspace as the turn ends; what the turn changed (None when that is
        not known: a failure here never fails the turn; a write refused here is refused
        again, and handled, when the turn's end is recorded)."""
        try:
            return await record_changes(self._services.turns, self._context, turn, attempt)
        except Exception:
            log.exception("turn %s: could not record its workspace at its end", turn.id)
            return None

    async def _fenced_out(self) -> None:
        """Another replica claimed the session and refused this one's write: its CLI is killed
        at once (never two CLIs on one thread), nothing more is written, and the session is
        reported lost (its host is dropped)."""
        log.warning(
            "session %s was claimed by another replica: its CLI here is stopped", self.session_id
        )
        self._quiet = self._stopping = True
        try:
            await self._context.handle.close(at_once=True)
        finally:
            self._services.fenced(self.session_id)

    async def _end(
        self,
        turn: TurnRecord,
        outcome: TurnOutcome,
        attempt: int,
        changes: ChangesSummary | None = None,
    ) -> None:
        live, services = self._context, self._services
        span = services.turns.events.tracer.current()  # the turn's
        span.set({"gateway.attempts": attempt, "gateway.provider": live.provider})
        ended(span, outcome.status, outcome.error, outcome.usage)
        terminal: EventData = await record_end(services.turns, live, turn, outcome, changes)
        # The session is idle before clients learn that the turn ended, so a client reacting
        # to the terminal event can start the next turn at once. The append's task is
        # scheduled as soon as `busy` clears, ahead of any turn a client could start, so this
        # event is numbered before the next turn's `turn.started`.
        self._last_active = time.monotonic()
        await self._set_status("idle")
        self._busy = False
        hooks = Hooks(services=services.turns, live=live, turn_id=turn.id, attempt=attempt)
        await hooks.emit(terminal)
        log.info(
            "turn %s of session %s %s",
            turn.id,
            live.session_id,
            outcome.status,
            extra={"session_id": live.session_id, "turn_id": turn.id, "provider": live.provider},
        )

    async def wait(self) -> None:
        """Return once the running turn (if any) has ended."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def interrupt(self) -> str:
        """Ask the CLI to stop the running turn; returns the turn id."""
        live = self._context
        if not self._busy or self._turn_id is None:
            raise NoTurnRunning(f"session {live.session_id} has no running turn to interrupt")
        if self._coordinator is not None:
            await self._coordinator.interrupt()
        else:
            await live.handle.interrupt()
        return self._turn_id

    # --- approvals and questions ----------------------------------------------------------------

    async def respond(
        self,
        approval_id: str,
        answer: ApprovalAnswer,
        *,
        provider: str,
        by: str,
        edit_refusal: str | None,
    ) -> ApprovalRecord:
        """Resolve a pending approval (told under the session's running turn)."""
        return await self._context.approvals.respond(
            approval_id, answer, self._emitter(provider), by=by, edit_refusal=edit_refusal
        )

    async def answer(
        self, question_id: str, answers: list[QuestionAnswer], *, provider: str, by: str
    ) -> ApprovalRecord:
        """Answer the agent's pending question."""
        return await self._context.approvals.answer(
            question_id, answers, self._emitter(provider), by=by
        )

    def _emitter(self, provider: str) -> Emit:
        events = self._services.turns.events

        async def emit(data: EventData) -> None:
            await events.append(self.session_id, data, turn_id=self._turn_id, provider=provider)

        return emit

    # --- the CLI ------------------------------------------------------------------------------

    async def suspend(self) -> None:
        """Close the CLI process (the session resumes from its binding on its next turn)."""
        await self._context.handle.suspend()

    async def stop(self, reason: str, *, quiet: bool = False, at_once: bool = False) -> None:
        """End the running turn (for ``reason``), withdraw what waits, close the CLI. ``quiet``:
        another replica runs the session now, so nothing is written and the CLI is killed at
        once; ``at_once``: the CLI gets no grace (the turn's end is still recorded)."""
        live = self._context
        self._stopping = True
        self._quiet = self._quiet or quiet
        self._stop_reason = reason
        live.approvals.cancel_reason = "session_closed"
        if quiet:  # the CLI first: another replica may be running this thread already
            await live.handle.close(at_once=True)
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await live.handle.close(at_once=quiet or at_once)
