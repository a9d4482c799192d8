"""The sessions of one gateway process: it creates them, runs their commands, and owns their
live CLI links.

Each session has at most one ``LiveSession`` (app/runtime/live.py) here, holding the
provider's session handle (and through it the CLI process), the running turn's task and the
pending approvals. A command runs against it (``execute``); with several replicas,
``ClusteredSessions`` (app/runtime/clustered.py) decides first that it runs on this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar, cast

from app.errors import (
    ApprovalNotPending,
    NotFound,
    NoTurnRunning,
    ProviderUnavailable,
    QuestionNotPending,
    SessionClosed,
    TurnInProgress,
)
from app.events import EventData
from app.events import SessionClosed as SessionClosedEvent
from app.observability.logs import bind_ids
from app.observability.metrics import GatewayMetrics
from app.process.workspaces import recheck_workspace
from app.providers.base import ApprovalAnswer, ProcessInfo, Provider, SessionSpec
from app.providers.registry import ProviderRegistry
from app.records import (
    ENDED_SESSION_STATUSES,
    ApprovalRecord,
    SessionRecord,
    SessionStatus,
    TurnRecord,
)
from app.runtime.approvals import ApprovalBroker, Emit
from app.runtime.choosing import Chooser
from app.runtime.commands import (
    Answer,
    Close,
    Interrupt,
    Issuer,
    Respond,
    SessionCommand,
    StartTurn,
)
from app.runtime.coordinator import RetryPolicy, Sleep, TurnCoordinator, resolve_policy
from app.runtime.creation import create_session
from app.runtime.eventlog import EventLog
from app.runtime.failover import Failover
from app.runtime.figures import FigureBook
from app.runtime.live import LiveSession, make_room
from app.runtime.recovery import fail_turn, recover
from app.runtime.requests import SessionRequest
from app.runtime.shares import admin_keys, holder_of, process_cap
from app.runtime.turns import GATEWAY_SHUTDOWN, Recorder, TurnServices, run_turn
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

R = TypeVar("R")


class LocalSessions:
    """Sessions, turns, approvals and interrupts on this gateway process (``Sessions``)."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Storage,
        events: EventLog,
        providers: Mapping[str, Provider],
        registry: ProviderRegistry,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Sleep = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self.registry = registry
        self.sleep = sleep
        self.monotonic = monotonic
        self.settings = settings
        self.store = store
        self.events = events
        self.providers = providers
        self.clock = clock
        self._live: dict[str, LiveSession] = {}
        self._guard = asyncio.Lock()
        self.figures = FigureBook(window_turns=settings.selection.window_turns, monotonic=monotonic)
        """Each provider's measured turns on this replica (routing strategies, metrics)."""
        self.chooser = Chooser(
            settings=settings, registry=registry, providers=providers, figures=self.figures
        )
        failover = Failover(
            settings=settings,
            store=store,
            events=events,
            providers=providers,
            select=self.chooser.next_for,
            clock=clock,
            sleep=sleep,
            monotonic=monotonic,
        )
        self._turn_services = TurnServices(
            events=events,
            store=store,
            clock=clock,
            max_event_bytes=settings.limits.max_turn_output_bytes,
            set_status=self.set_status,
            turn_finished=self.turn_finished,
            forget_provider=registry.forget,
            figures=self.figures,
            fail_over=failover.go_on,
            metrics=metrics,
        )

    # --- sessions -------------------------------------------------------------------------

    async def create(self, request: SessionRequest) -> SessionRecord:
        """Validate everything, then store the session whole; nothing is spawned here
        (app/runtime/creation.py)."""
        return await create_session(
            request,
            settings=self.settings,
            chooser=self.chooser,
            store=self.store,
            events=self.events,
            clock=self.clock,
        )

    async def get(self, session_id: str, *, owner: str | None = None) -> SessionRecord:
        row = await self.store.get_session(session_id)
        if row is None or (owner is not None and row.owner != owner):
            raise NotFound(f"session {session_id} does not exist")
        return row

    def process_info(self, session_id: str) -> ProcessInfo | None:
        live = self._live.get(session_id)
        return live.handle.process if live else None

    async def thread_id(self, row: SessionRecord) -> str | None:
        live = self._live.get(row.id)
        if live is not None and live.thread_id is not None:
            return live.thread_id
        binding = await self.store.get_binding(row.id, row.provider)
        return binding.thread_id if binding else None

    async def replica_of(self, session_id: str) -> str | None:
        return None

    def is_live(self, session_id: str) -> bool:
        """Whether the session has its live side in this process."""
        return session_id in self._live

    async def set_status(self, live: LiveSession, status: SessionStatus) -> None:
        await self.store.update_session(live.session_id, status=status, updated_at=self.clock())

    # --- commands -------------------------------------------------------------------------

    async def execute(self, command: SessionCommand[R], issuer: Issuer) -> R:
        """Run ``command`` here, as ``issuer`` (404 for a session that key may not reach)."""
        match command:
            case StartTurn():
                return cast(R, await self._start_turn(command, issuer))
            case Interrupt():
                return cast(R, await self._interrupt(command, issuer))
            case Respond():
                return cast(R, await self._respond(command, issuer))
            case Answer():
                return cast(R, await self._answer(command, issuer))
            case Close():
                return cast(R, await self._close(command, issuer))
        raise NotFound(f"no command {command.kind!r}")  # pragma: no cover - a closed set

    async def _close(self, command: Close, issuer: Issuer) -> SessionRecord:
        """Stop the session's turn and process group, close its event stream."""
        session_id = command.session_id
        row = await self.get(session_id, owner=issuer.owner)
        if row.status in ENDED_SESSION_STATUSES:
            return row
        await self.drop(session_id, "session closed")
        await self.events.append(
            session_id, SessionClosedEvent(reason="deleted"), provider=row.provider
        )
        now = self.clock()
        row = await self.store.update_session(
            session_id, status="closed", closed_at=now, updated_at=now
        )
        await self.events.close(session_id)
        log.info("session %s closed", session_id)
        return row

    async def drop(self, session_id: str, reason: str) -> None:
        """Stop the session's live side here, if it has one (its turn ends for ``reason``)."""
        live = self._live.pop(session_id, None)
        if live is not None:
            await self._stop_live(live, reason)

    async def _stop_live(self, live: LiveSession, reason: str) -> None:
        live.stop_reason = reason
        live.approvals.cancel_reason = "session_closed"
        if live.turn_task is not None and not live.turn_task.done():
            live.turn_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await live.turn_task
        await live.handle.close()

    async def _start_turn(self, command: StartTurn, issuer: Issuer) -> TurnRecord:
        """Create the turn and start it in the background; 409 while another one runs."""
        session_id = command.session_id
        async with self._guard:
            row = await self.get(session_id, owner=issuer.owner)
            if row.status in ENDED_SESSION_STATUSES:
                raise SessionClosed(f"session {session_id} is {row.status}; create a new session")
            recheck_workspace(row.id, row.workspace, self.settings.workspaces.roots)
            live = await self._live_session(row)
            if live.busy:
                raise TurnInProgress(
                    f"session {session_id} is already running turn {live.turn_id}; "
                    "wait for it to end or interrupt it",
                    turn_id=live.turn_id,
                )
            policy = resolve_policy(command.retry, row.retry, self.settings.retry)
            await make_room(
                live,
                self._live.values(),
                providers=self.providers,
                cap=process_cap(self.settings),
            )
            now = self.clock()
            turn = TurnRecord(
                id="trn_" + secrets.token_hex(16),
                session_id=session_id,
                number=0,  # set by add_turn
                prompt=command.prompt,
                status="queued",
                attempts=0,
                retry_policy=policy.snapshot(),
                provider=row.provider,
                created_at=now,
            )
            turn = await self.store.add_turn(turn, now=now)
            self._launch(live, turn, policy)
        return turn

    def _launch(self, live: LiveSession, turn: TurnRecord, policy: RetryPolicy) -> None:
        """Run ``turn`` in its own task; a turn with ``resume_at`` resumes its stored wait
        for a usage limit's reset, then continues with its next attempt."""
        resumed = turn.resume_at is not None
        live.turn_id = turn.id
        live.busy = True
        live.stop_reason = "interrupted by the client"
        recorder = Recorder(
            services=self._turn_services,
            live=live,
            turn_id=turn.id,
            attempts=turn.attempts,
            scheduled=resumed,
        )
        live.coordinator = TurnCoordinator(
            handle=live.handle,
            policy=policy,
            continuation_prompt=self.settings.retry.continuation_prompt,
            turn_timeout_s=self.settings.sessions.turn_timeout_s,
            reporter=recorder,
            sleep=self.sleep,
            monotonic=self.monotonic,
            clock=self.clock,
            first_attempt=turn.attempts + 1,
            resume_at=turn.resume_at,
        )
        # The task copies this context: every line it logs names the session and turn.
        with bind_ids(session_id=live.session_id, turn_id=turn.id, provider=live.provider):
            live.turn_task = asyncio.create_task(
                run_turn(self._turn_services, live, turn, live.coordinator, resumed=resumed),
                name=f"turn:{turn.id}",
            )

    async def resume(self, turn: TurnRecord) -> bool:
        """Go on with a turn's stored wait for a usage limit's reset (after a restart or on
        the replica that adopted its session); a turn that cannot go on is ended. Whether
        the turn runs here now."""
        async with self._guard:
            row = await self.get(turn.session_id)
            try:
                if row.status in ENDED_SESSION_STATUSES:
                    raise SessionClosed(f"session {row.id} is {row.status}")
                live = await self._live_session(row)
                policy = RetryPolicy.from_snapshot(turn.retry_policy or {})
            except (ProviderUnavailable, SessionClosed, ValueError) as exc:
                log.warning("turn %s cannot resume after its usage limit: %s", turn.id, exc)
                await fail_turn(
                    self.store,
                    self.events,
                    turn,
                    now=self.clock(),
                    reason="gateway_restart",
                    message=f"gateway_restart: the turn could not resume its wait ({exc})",
                )
                return False
            await self.set_status(live, "retrying")
            self._launch(live, turn, policy)
        log.info(
            "turn %s resumes its wait for the usage limit's reset (%s)",
            turn.id,
            turn.resume_at.isoformat() if turn.resume_at else "now",
            extra={"session_id": turn.session_id, "turn_id": turn.id},
        )
        return True

    async def _live_session(self, row: SessionRecord) -> LiveSession:
        live = self._live.get(row.id)
        if live is not None:
            return live
        provider = self.providers.get(row.provider)
        if provider is None:
            raise ProviderUnavailable(f"provider {row.provider!r} is disabled on this gateway")
        binding = await self.store.get_binding(row.id, row.provider)
        spec = SessionSpec(
            session_id=row.id,
            workspace=Path(row.workspace),
            model=row.model,
            approval_mode=row.approval_mode,  # type: ignore[arg-type]
            thread_id=binding.thread_id if binding else None,
            thread_bound_at=binding.created_at if binding else None,
        )
        session_id = row.id

        async def on_change(pending: int) -> None:
            live = self._live.get(session_id)
            if live is not None and live.busy:
                await self.set_status(live, "awaiting_approval" if pending else "running")

        live = LiveSession(
            session_id=session_id,
            provider=row.provider,
            handle=provider.open_session(spec),
            approvals=ApprovalBroker(
                session_id=session_id,
                store=self.store,
                timeout_s=self.settings.sessions.approval_timeout_s,
                clock=self.clock,
                on_change=on_change,
                mask=self.events.mask,
            ),
            thread_id=spec.thread_id,
            holder=holder_of(row.owner, admin_keys(self.settings)),
            model=row.model,
        )
        self._live[row.id] = live
        return live

    async def wait_turn(self, session_id: str) -> None:
        """Return once the session's running turn (if any) has ended."""
        live = self._live.get(session_id)
        if live is not None and live.turn_task is not None:
            await asyncio.shield(live.turn_task)

    async def turn_finished(self, live: LiveSession) -> None:
        """The turn's row is final: the session takes new turns from now on."""
        live.last_active = time.monotonic()
        await self.set_status(live, "idle")
        live.busy = False

    async def _interrupt(self, command: Interrupt, issuer: Issuer) -> str:
        """Ask the CLI to stop the running turn; returns the turn id."""
        session_id = command.session_id
        await self.get(session_id, owner=issuer.owner)
        live = self._live.get(session_id)
        if live is None or not live.busy or live.turn_id is None:
            raise NoTurnRunning(f"session {session_id} has no running turn to interrupt")
        if live.coordinator is not None:
            await live.coordinator.interrupt()
        else:
            await live.handle.interrupt()
        return live.turn_id

    # --- approvals and questions ------------------------------------------------------------

    async def _respond(self, command: Respond, issuer: Issuer) -> ApprovalRecord:
        """Resolve a pending approval; the issuer's name is recorded when it edited the
        input."""
        session_id, approval_id = command.session_id, command.approval_id
        row = await self.get(session_id, owner=issuer.owner)
        live = self._live.get(session_id)
        if live is None:
            approval = await self.store.get_approval(session_id, approval_id)
            if approval is None:
                raise NotFound(f"approval {approval_id} does not exist in this session")
            raise ApprovalNotPending(f"approval {approval_id} is already {approval.status}")
        answer = ApprovalAnswer(
            decision=command.decision,
            message=command.message,
            updated_input=command.updated_input,
        )
        return await live.approvals.respond(
            approval_id,
            answer,
            self._emitter(live, row),
            by=issuer.name,
            edit_refusal=self._edit_refusal(row.provider),
        )

    async def _answer(self, command: Answer, issuer: Issuer) -> ApprovalRecord:
        """Answer the agent's pending question; the issuer's name is recorded as who did."""
        session_id, question_id = command.session_id, command.question_id
        row = await self.get(session_id, owner=issuer.owner)
        live = self._live.get(session_id)
        if live is None:  # no turn of the session runs here: nothing waits for an answer
            pending = await self.store.get_approval(session_id, question_id)
            if pending is None or pending.kind != "question":
                raise NotFound(f"question {question_id} does not exist in this session")
            raise QuestionNotPending(
                f"question {question_id} is already {pending.status}",
                question_status=pending.status,
            )
        return await live.approvals.answer(
            question_id, list(command.answers), self._emitter(live, row), by=issuer.name
        )

    def _emitter(self, live: LiveSession, row: SessionRecord) -> Emit:
        """Where a client's answer is told: the session's log, under its running turn."""

        async def emit(data: EventData) -> None:
            await self.events.append(row.id, data, turn_id=live.turn_id, provider=row.provider)

        return emit

    def _edit_refusal(self, provider: str) -> str | None:
        """Why an allow with edited input cannot be taken for this provider, or None."""
        if not self.settings.sessions.allow_updated_input:
            return (
                "this gateway does not accept edited tool input "
                "(sessions.allow_updated_input = false): allow or deny the call as asked"
            )
        built = self.providers.get(provider)
        if built is not None and not built.capabilities.approval_edits:
            return (
                f"{provider} runs exactly the tool call it asked about and cannot take edited "
                "input: allow or deny the call as asked"
            )
        return None

    # --- lifecycle ------------------------------------------------------------------------

    async def recover(self) -> None:
        """After a restart: end the turns and approvals that died with the previous process;
        resume the stored waits for a usage limit's reset."""
        for turn in await recover(self.store, self.events, now=self.clock()):
            await self.resume(turn)

    async def start(self) -> None:
        """Nothing comes from outside the API on a single gateway."""

    async def suspend_idle(self, now: float | None = None) -> int:
        """Close live processes idle past their provider's ``idle_timeout_s``."""
        moment = time.monotonic() if now is None else now
        suspended = 0
        for live in list(self._live.values()):
            idle_limit = self.settings.providers[live.provider].idle_timeout_s
            if not live.busy and live.handle.process and moment - live.last_active >= idle_limit:
                await live.handle.suspend()
                suspended += 1
        return suspended

    async def aclose(self) -> None:
        """Stop every live session (turns end as interrupted); used at shutdown."""
        lives = list(self._live.values())
        self._live.clear()
        await asyncio.gather(
            *(self._stop_live(live, GATEWAY_SHUTDOWN) for live in lives),
            return_exceptions=True,
        )
