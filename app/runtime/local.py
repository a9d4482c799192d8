"""The sessions of one gateway process: it creates them, runs their commands, and owns their
live CLI links.

Each session has at most one ``SessionHost`` (app/runtime/host.py) here, the owner of its
provider's session handle (and through it the CLI process), its running turn and its pending
approvals and questions. A command runs against it (``execute``); with several replicas,
``ClusteredSessions`` (app/runtime/clustered.py) decides first that it runs on this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
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
from app.events import SessionClosed as SessionClosedEvent
from app.observability.metrics import GatewayMetrics
from app.providers.base import ApprovalAnswer, ProcessInfo, Provider
from app.providers.registry import ProviderRegistry
from app.records import (
    BUSY_SESSION_STATUSES,
    ENDED_SESSION_STATUSES,
    ApprovalRecord,
    RevertRecord,
    SessionRecord,
    TurnRecord,
)
from app.runtime.approvals import edit_refusal
from app.runtime.budgets import admit_turn
from app.runtime.choosing import Chooser
from app.runtime.commands import (
    Answer,
    Close,
    Configure,
    Fork,
    Interrupt,
    Issuer,
    Respond,
    Revert,
    SessionCommand,
    StartTurn,
)
from app.runtime.configuring import configure
from app.runtime.coordinator import RetryPolicy, Sleep, resolve_policy
from app.runtime.creation import create_session
from app.runtime.eventlog import EventLog
from app.runtime.exclusive import CONFIGURE, FORK, REVERT, Exclusive, Operation
from app.runtime.failover import Failover
from app.runtime.figures import FigureBook
from app.runtime.forking import ForkServices, fork_session, turn_to_fork
from app.runtime.history import history_for
from app.runtime.host import HostServices, SessionHost
from app.runtime.live import make_room, session_spec
from app.runtime.recovery import fail_turn, recover
from app.runtime.requests import SessionRequest
from app.runtime.reverting import revert
from app.runtime.shares import admin_keys, holder_of, process_cap
from app.runtime.turns import GATEWAY_SHUTDOWN, TurnServices
from app.runtime.worktrees import recheck_session_workspace, remove_worktree
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
        self.metrics = metrics
        self.sleep = sleep
        self.monotonic = monotonic
        self.settings = settings
        self.store = store
        self.events = events
        self.providers = providers
        self.clock = clock
        self._hosts: dict[str, SessionHost] = {}
        self._exclusive = Exclusive()
        """Sessions a revert or a fork runs on here: no turn starts on them meanwhile."""
        self._guard = asyncio.Lock()
        self.history = history_for(settings)
        """Each session's workspace, recorded at every turn's start and end."""
        self._forks = ForkServices(
            settings=settings,
            store=store,
            events=events,
            providers=providers,
            clock=clock,
            history=self.history,
        )
        self.figures = FigureBook(window_turns=settings.selection.window_turns, monotonic=monotonic)
        """Each provider's measured turns on this replica (routing strategies, metrics)."""
        self.chooser = Chooser(
            settings=settings, registry=registry, providers=providers, figures=self.figures
        )
        failover = Failover(
            settings=settings,
            store=store,
            events=events,
            select=self.chooser.next_for,
            clock=clock,
        )
        turns = TurnServices(
            events=events,
            store=store,
            clock=clock,
            max_event_bytes=settings.limits.max_turn_output_bytes,
            forget_provider=registry.forget,
            figures=self.figures,
            metrics=metrics,
            history=self.history,
        )
        self._host_services = HostServices(
            settings=settings,
            store=store,
            turns=turns,
            providers=providers,
            clock=clock,
            sleep=sleep,
            monotonic=monotonic,
            fail_over=failover.go_on,
            fenced=self._fenced,
        )
        self.fenced: Callable[[str], None] | None = None
        """Told when a write for a session was refused because another replica claimed it
        (set by ``ClusteredSessions``)."""

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
            history=self.history,
        )

    async def get(self, session_id: str, *, owner: str | None = None) -> SessionRecord:
        row = await self.store.get_session(session_id)
        if row is None or (owner is not None and row.owner != owner):
            raise NotFound(f"session {session_id} does not exist")
        return row

    def process_info(self, session_id: str) -> ProcessInfo | None:
        host = self._hosts.get(session_id)
        return host.process if host else None

    async def thread_id(self, row: SessionRecord) -> str | None:
        host = self._hosts.get(row.id)
        if host is not None and host.thread_id is not None:
            return host.thread_id
        binding = await self.store.get_binding(row.id, row.provider)
        return binding.thread_id if binding else None

    async def replica_of(self, session_id: str) -> str | None:
        return None

    def is_live(self, session_id: str) -> bool:
        """Whether the session has its live side in this process."""
        return session_id in self._hosts

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
            case Revert():
                return cast(R, await self._revert(command, issuer))
            case Fork():
                return cast(R, await self._fork(command, issuer))
            case Configure():
                return cast(R, await self._configure(command, issuer))
            case Close():
                return cast(R, await self._close(command, issuer))
        raise NotFound(f"no command {command.kind!r}")  # pragma: no cover - a closed set

    async def _close(self, command: Close, issuer: Issuer) -> SessionRecord:
        """Stop the session's turn and process group, remove its worktree (its branch is
        kept), close its event stream."""
        session_id = command.session_id
        row = await self.get(session_id, owner=issuer.owner)
        if row.status in ENDED_SESSION_STATUSES:
            await remove_worktree(self.settings, row)  # ended by a failure or retention
            return row
        await self.drop(session_id, "session closed")
        await remove_worktree(self.settings, row)
        await self.events.append(
            session_id,
            SessionClosedEvent(reason="deleted", kept_branch=row.branch),
            provider=row.provider,
        )
        now = self.clock()
        row = await self.store.update_session(
            session_id, status="closed", closed_at=now, updated_at=now
        )
        await self.events.close(session_id)
        log.info("session %s closed", session_id)
        return row

    async def drop(
        self, session_id: str, reason: str, *, quiet: bool = False, at_once: bool = False
    ) -> None:
        """Stop the session's live side here, if it has one (its turn ends for ``reason``;
        ``quiet`` and ``at_once`` as for ``SessionHost.stop``)."""
        host = self._hosts.pop(session_id, None)
        if host is not None:
            await host.stop(reason, quiet=quiet, at_once=at_once)

    def _fenced(self, session_id: str) -> None:
        if self.fenced is not None:
            self.fenced(session_id)

    async def _start_turn(self, command: StartTurn, issuer: Issuer) -> TurnRecord:
        """Create the turn and start it in the background; 409 while another one runs."""
        session_id = command.session_id
        async with self._guard:
            row = await self.get(session_id, owner=issuer.owner)
            if row.status in ENDED_SESSION_STATUSES:
                raise SessionClosed(f"session {session_id} is {row.status}; create a new session")
            recheck_session_workspace(row, self.settings)
            self._exclusive.refuse_turn(session_id)
            host = await self._host(row)
            if host.busy:
                raise TurnInProgress(
                    f"session {session_id} is already running turn {host.turn_id}; "
                    "wait for it to end or interrupt it",
                    turn_id=host.turn_id,
                )
            policy = resolve_policy(command.retry, row.retry, self.settings.retry)
            spending = await admit_turn(self.store, self.settings, row, self.clock)
            cap = process_cap(self.settings)
            await make_room(host, self._hosts.values(), providers=self.providers, cap=cap)
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
            host.launch(turn, policy, spending)
        return turn

    @contextlib.asynccontextmanager
    async def _exclusively(
        self, session_id: str, issuer: Issuer, operation: Operation
    ) -> AsyncIterator[SessionRecord]:
        """The session, marked for ``operation`` (app/runtime/exclusive.py) in the block; 409
        while a turn runs on it (here or, by its status, anywhere) or another such one does."""
        async with self._guard:
            row = await self.get(session_id, owner=issuer.owner)
            if row.status in ENDED_SESSION_STATUSES:
                raise SessionClosed(
                    f"session {session_id} is {row.status}; it cannot be {operation.doing}"
                )
            host = self._hosts.get(session_id)
            if (host is not None and host.busy) or row.status in BUSY_SESSION_STATUSES:
                raise TurnInProgress(
                    f"session {session_id} is running a turn; wait for it to end or interrupt "
                    "it first",
                    turn_id=host.turn_id if host is not None else None,
                )
            self._exclusive.begin(session_id, operation)
        try:
            yield row
        finally:
            self._exclusive.end(session_id)

    async def _revert(self, command: Revert, issuer: Issuer) -> RevertRecord:
        """Put the workspace back as at a turn's start; 409 while a turn runs (and no turn
        starts until it is done)."""
        async with self._exclusively(command.session_id, issuer, REVERT) as row:
            recheck_session_workspace(row, self.settings)
            return await revert(
                row,
                command.to_turn,
                by=issuer.name,
                history=self.history,
                store=self.store,
                events=self.events,
            )

    async def _fork(self, command: Fork, issuer: Issuer) -> SessionRecord:
        """Make a new session from the session's files and conversation up to a completed
        turn (app/runtime/forking.py); 409 while a turn runs, and no turn starts until the
        fork is made."""
        async with self._exclusively(command.session_id, issuer, FORK) as row:
            turn = await turn_to_fork(self.store, row, command.at_turn)
            return await fork_session(row, turn, services=self._forks)

    async def _configure(self, command: Configure, issuer: Issuer) -> SessionRecord:
        """Change the session's model, approval mode or provider for its next turns
        (app/runtime/configuring.py); 409 while a turn runs, and no turn starts meanwhile."""
        async with self._exclusively(command.session_id, issuer, CONFIGURE) as row:
            return await configure(
                row,
                command,
                by=issuer.name,
                chooser=self.chooser,
                store=self.store,
                events=self.events,
                clock=self.clock,
                release=lambda: self.drop(row.id, "session configured"),
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
                host = await self._host(row)
                policy = RetryPolicy.from_snapshot(turn.retry_policy or {})
                spending = await admit_turn(
                    self.store, self.settings, row, self.clock, refuse=False
                )
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
            await host.resume(turn, policy, spending)
        log.info(
            "turn %s resumes its wait for the usage limit's reset (%s)",
            turn.id,
            turn.resume_at.isoformat() if turn.resume_at else "now",
            extra={"session_id": turn.session_id, "turn_id": turn.id},
        )
        return True

    async def _host(self, row: SessionRecord) -> SessionHost:
        """The session's host here, opening its provider's session (no process yet) when it
        has none."""
        host = self._hosts.get(row.id)
        if host is not None:
            return host
        provider = self.providers.get(row.provider)
        if provider is None:
            raise ProviderUnavailable(f"provider {row.provider!r} is disabled on this gateway")
        spec = session_spec(row, await self.store.get_binding(row.id, row.provider))
        host = SessionHost(
            services=self._host_services,
            session_id=row.id,
            provider=row.provider,
            handle=provider.open_session(spec),
            thread_id=spec.thread_id,
            holder=holder_of(row.owner, admin_keys(self.settings)),
            model=row.model,
            approval_timeout_s=self.settings.sessions.approval_timeout_s,
            workspace=spec.workspace,
            fork_start=row.fork_start,
        )
        self._hosts[row.id] = host
        return host

    async def wait_turn(self, session_id: str) -> None:
        """Return once the session's running turn (if any) has ended."""
        host = self._hosts.get(session_id)
        if host is not None:
            await host.wait()

    async def _interrupt(self, command: Interrupt, issuer: Issuer) -> str:
        """Ask the CLI to stop the running turn; returns the turn id."""
        session_id = command.session_id
        await self.get(session_id, owner=issuer.owner)
        host = self._hosts.get(session_id)
        if host is None:
            raise NoTurnRunning(f"session {session_id} has no running turn to interrupt")
        return await host.interrupt()

    # --- approvals and questions ------------------------------------------------------------

    async def _respond(self, command: Respond, issuer: Issuer) -> ApprovalRecord:
        """Resolve a pending approval; the issuer's name is recorded when it edited the
        input."""
        session_id, approval_id = command.session_id, command.approval_id
        row = await self.get(session_id, owner=issuer.owner)
        host = self._hosts.get(session_id)
        if host is None:
            approval = await self.store.get_approval(session_id, approval_id)
            if approval is None:
                raise NotFound(f"approval {approval_id} does not exist in this session")
            raise ApprovalNotPending(f"approval {approval_id} is already {approval.status}")
        answer = ApprovalAnswer(
            decision=command.decision,
            message=command.message,
            updated_input=command.updated_input,
        )
        return await host.respond(
            approval_id,
            answer,
            provider=row.provider,
            by=issuer.name,
            edit_refusal=edit_refusal(self.settings, self.providers, row.provider),
        )

    async def _answer(self, command: Answer, issuer: Issuer) -> ApprovalRecord:
        """Answer the agent's pending question; the issuer's name is recorded as who did."""
        session_id, question_id = command.session_id, command.question_id
        row = await self.get(session_id, owner=issuer.owner)
        host = self._hosts.get(session_id)
        if host is None:  # no turn of the session runs here: nothing waits for an answer
            pending = await self.store.get_approval(session_id, question_id)
            if pending is None or pending.kind != "question":
                raise NotFound(f"question {question_id} does not exist in this session")
            raise QuestionNotPending(
                f"question {question_id} is already {pending.status}",
                question_status=pending.status,
            )
        return await host.answer(
            question_id, list(command.answers), provider=row.provider, by=issuer.name
        )

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
        for host in list(self._hosts.values()):
            idle_limit = self.settings.providers[host.provider].idle_timeout_s
            if not host.busy and host.process and moment - host.last_active >= idle_limit:
                await host.suspend()
                suspended += 1
        return suspended

    async def aclose(self) -> None:
        """Stop every live session (turns end as interrupted); used at shutdown."""
        hosts = list(self._hosts.values())
        self._hosts.clear()
        await asyncio.gather(
            *(host.stop(GATEWAY_SHUTDOWN) for host in hosts),
            return_exceptions=True,
        )
