"""One gateway session on one ACP agent: its agent process, its thread and its turns.

A session's first turn spawns the agent, ``initialize``\\ s it and opens a thread:
``session/new`` with the workspace as ``cwd``, or, with a thread in the binding,
``session/resume`` when the agent offers it, else ``session/load``, else (or when that fails) a
new thread and a ``context_lost`` warning; a fork's first run, ``session/fork`` of the parent's
thread (the same warning when that fails). Then the session mode that asks before running tools
is set (``AgentRecipe.modes``) and each turn is one ``session/prompt``.

``session/update`` notifications, ``session/request_permission`` requests and form
``elicitation/create`` requests (asked as questions, ``elicitation.py``) go into the running
turn's inbox, which ``TurnLoop`` follows (deadlines, approvals, questions) and
``TurnTranslator`` turns into events; the requests wait in ``asks.Pending``. An interrupt is
``session/cancel``, and every pending permission request is answered ``cancelled`` as the
protocol requires (a pending elicitation ``cancel``). A URL elicitation is declined: the
gateway has no browser to open. The process plumbing (spawn, follower, release, the turn's
skeleton) is the shared ``process_session.ProcessSession``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    CancelElicitationResponse,
    ClientCapabilities,
    CreateElicitationResponse,
    DeclineElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationFormSessionMode,
    ElicitationMode,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionModeState,
    UsageUpdate,
)

from app import __version__
from app.events import ApprovalMode, EventData, TurnError, Warning
from app.process.managed import ManagedProcess
from app.providers.acp import faults
from app.providers.acp.agents import AgentRecipe
from app.providers.acp.asks import CANCELLED, Asked, Elicited, Pending, form_reply, permission_reply
from app.providers.acp.client import AgentClient, connect
from app.providers.acp.elicitation import read_form
from app.providers.acp.options import ConfigOptions, apply_mode, apply_model
from app.providers.acp.updates import TurnTranslator
from app.providers.base import (
    SessionSpec,
    TurnHooks,
    TurnOutcome,
)
from app.providers.exits import how_it_ended
from app.providers.process_session import ProcessSession, Running, SessionHost
from app.providers.turnloop import TurnLoop

log = logging.getLogger(__name__)

REPLAY_QUIET_S = 0.3
"""After ``session/load``, how long no update must arrive before the history replay of an
agent that replays after answering (``replays_after_load``) counts as over."""
REPLAY_LIMIT_S = 10.0


@dataclass(frozen=True)
class _Answered:
    task: asyncio.Task[Any]


@dataclass(frozen=True)
class _Exited:
    error: TurnError


_Item = Any  # an SDK session update, Asked, Elicited, _Answered or _Exited


@dataclass(eq=False, kw_only=True)
class _Live(Running):
    connection: ClientSideConnection
    client: AgentClient
    thread: str | None = None
    """The agent's session id on this process, once opened."""


class AgentHost(SessionHost, Protocol):
    """What a session needs of its agent's provider (``provider.AcpProvider`` has it)."""

    @property
    def cli(self) -> str: ...

    @property
    def recipe(self) -> AgentRecipe: ...

    @property
    def argv(self) -> tuple[str, ...]: ...

    def child_env(self, approval_mode: ApprovalMode, /) -> dict[str, str]:
        """The agent's environment for a session in ``approval_mode``."""

    def session_meta(self) -> dict[str, Any]:
        """The ``_meta`` of every session/new, session/load and session/resume."""

    def workspace_config_refusal(self) -> str | None:
        """Why the agent may not run here (it would load the workspace's own config)."""


class AcpSession(ProcessSession[_Live, _Item]):
    """One gateway session on one ACP agent; spawns (or resumes) its process on demand."""

    def __init__(self, *, provider: AgentHost, spec: SessionSpec) -> None:
        super().__init__(host=provider, spec=spec, cli=provider.cli)
        self._provider = provider
        self._thread_since = spec.thread_bound_at
        self._translator = TurnTranslator(provider.name)
        self._inbox: asyncio.Queue[_Item] | None = None
        self._pending = Pending()
        self._interrupt_requested = asyncio.Event()
        self._cancelled_at: float | None = None

    # --- what the agent sends -------------------------------------------------------------

    def deliver(self, session_id: str, update: Any) -> None:
        """A ``session/update``: into the running turn, else dropped (a history replay)."""
        live = self._live
        if self._inbox is None or live is None or session_id != live.thread:
            return
        self._inbox.put_nowait(update)

    async def ask(self, request: RequestPermissionRequest) -> RequestPermissionResponse:
        live = self._live
        if self._inbox is None or live is None or request.session_id != live.thread:
            return CANCELLED
        return await self._pending.ask(self._inbox, request)

    async def elicit(self, message: str, mode: ElicitationMode) -> CreateElicitationResponse:
        """An ``elicitation/create``: a form of the running turn is asked as questions; a URL
        (the gateway cannot open a browser), a form outside a turn or one whose fields the
        gateway cannot ask is declined; one that comes after an interrupt is cancelled."""
        live = self._live
        if not isinstance(mode, ElicitationFormSessionMode):
            log.info(
                "declined %s elicitation from %s: the gateway cannot open a browser or ask "
                "outside a session",
                type(mode).__name__,
                self._provider.name,
            )
            return DeclineElicitationResponse(action="decline")
        if self._loop is not None and self._loop.interrupted:
            return CancelElicitationResponse(action="cancel")
        if self._inbox is None or live is None or mode.session_id != live.thread:
            log.info("declined a form elicitation for %s: no turn of it runs", mode.session_id)
            return DeclineElicitationResponse(action="decline")
        form = read_form(
            f"elicit-{uuid.uuid4().hex[:12]}",
            message,
            mode.requested_schema,
            tool_id=mode.tool_call_id,
        )
        if form is None:
            log.info(
                "declined a form elicitation from %s: no field the gateway can ask, or one "
                "it cannot take (fields: %s)",
                self._provider.name,
                sorted((mode.requested_schema.properties or {}).keys()),
            )
            return DeclineElicitationResponse(action="decline")
        return await self._pending.elicit(self._inbox, form)

    # --- process lifecycle ----------------------------------------------------------------

    async def _ensure_process(self, hooks: TurnHooks) -> _Live | TurnOutcome:
        live = await self._serving()
        if live is not None:
            return live
        provider = self._provider
        refused = provider.workspace_config_refusal()
        if refused is not None:  # a session bound before the operator turned it off
            return self._failed("invalid_request", refused)
        spawned = await self._spawn(
            provider.argv,
            provider.child_env(self._spec.approval_mode),
            self._watch,
            task="acp-watch",
        )
        if isinstance(spawned, TurnOutcome):
            return spawned
        process, watcher, info = spawned
        client, connection = connect(self, process, label=provider.name)
        live = self._live = _Live(
            process=process, connection=connection, client=client, info=info, follower=watcher
        )
        try:
            async with asyncio.timeout(provider.settings.startup_timeout_s):
                agent = await connection.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                        terminal=False,
                        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()),
                    ),
                    client_info=Implementation(
                        name="agent-gateway", title="Agent Gateway", version=__version__
                    ),
                )
                opened = await self._open_thread(live, agent, hooks)
        except (TimeoutError, RequestError, ConnectionError) as exc:
            await self._release(live)
            return self._failed("cli_crashed", self._start_failure(process, exc), retryable=True)
        if isinstance(opened, TurnOutcome):
            await self._release(live)
            return opened
        return live

    def _start_failure(self, process: ManagedProcess, exc: BaseException) -> str:
        cli = self._provider.cli
        if isinstance(exc, TimeoutError):
            what = f"did not start within {self._provider.settings.startup_timeout_s:.0f} s"
        elif process.returncode is not None:
            what = how_it_ended(process.returncode, suffix=" while starting")
        else:
            what = f"refused to start a session: {exc}"
        tail = process.stderr_tail.strip()
        return f"{cli} {what}." + (f" stderr: {tail[-1500:]}" if tail else "")

    async def _open_thread(
        self, live: _Live, agent: InitializeResponse, hooks: TurnHooks
    ) -> TurnOutcome | None:
        """Resume the binding's thread on the new process, or open a new one."""
        spec, recipe = self._spec, self._provider.recipe
        cwd = str(spec.workspace)
        caps = agent.agent_capabilities
        modes: SessionModeState | None = None
        options: ConfigOptions = None
        thread = self._thread_id
        meta = self._provider.session_meta()
        if thread is not None:
            resumable = bool(
                caps and caps.session_capabilities and caps.session_capabilities.resume
            )
            loadable = bool(caps and caps.load_session)
            why = "the agent can neither resume nor load a thread"
            try:
                if resumable:
                    reopened = await live.connection.resume_session(
                        session_id=thread, cwd=cwd, **meta
                    )
                    modes, options, live.thread = reopened.modes, reopened.config_options, thread
                elif loadable:
                    await self._before_load()
                    live.thread = thread  # its replay is dropped: no turn is running
                    loaded = await live.connection.load_session(session_id=thread, cwd=cwd, **meta)
                    modes, options = loaded.modes, loaded.config_options
                    if recipe.replays_after_load:
                        await self._replay_over(live.client)
            except RequestError as exc:
                live.thread = None
                why = f"the agent could not reopen it: {exc}"
            if live.thread is None:
                await hooks.emit(
                    Warning(
                        code="context_lost",
                        message=f"{self._provider.cli} could not continue thread {thread} "
                        f"({why}); this turn starts a new conversation.",
                    )
                )
        elif spec.fork_from is not None:
            modes, options = await self._fork(live, agent, hooks)
        if live.thread is None:
            opened = await live.connection.new_session(cwd=cwd, mcp_servers=[], **meta)
            live.thread = opened.session_id
            modes, options = opened.modes, opened.config_options
            self._thread_since = datetime.now(UTC)
        if live.thread != self._thread_id:
            self._thread_id = live.thread
        await hooks.bind_thread(live.thread)
        cli = self._provider.cli
        refused = await apply_mode(
            live.connection, live.thread, recipe, spec.approval_mode, modes, cli=cli
        )
        if refused is not None:
            return self._failed("agent_error", refused)
        # Known only now, from what the agent advertised: the process is closed by the caller.
        refused = await apply_model(live.connection, live.thread, spec.model, options, cli=cli)
        return None if refused is None else self._failed("invalid_request", refused)

    async def _fork(
        self, live: _Live, agent: InitializeResponse, hooks: TurnHooks
    ) -> tuple[SessionModeState | None, ConfigOptions]:
        """A fork's first run: ``session/fork`` of the parent's thread into this session's
        workspace (``AcpProvider.fork_thread``); a ``context_lost`` warning when the agent
        cannot fork it (the caller then opens a new thread)."""
        spec = self._spec
        assert spec.fork_from is not None
        parent = spec.fork_from.thread_id
        caps = agent.agent_capabilities
        why = "the agent does not offer session/fork"
        if caps and caps.session_capabilities and caps.session_capabilities.fork:
            try:
                forked = await live.connection.fork_session(
                    session_id=parent,
                    cwd=str(spec.workspace),
                    mcp_servers=[],
                    **self._provider.session_meta(),
                )
            except RequestError as exc:
                why = f"the agent refused: {exc}"
            else:
                live.thread = forked.session_id
                self._thread_since = datetime.now(UTC)
                return forked.modes, forked.config_options
        await hooks.emit(
            Warning(
                code="context_lost",
                message=f"{self._provider.cli} could not fork thread {parent} ({why}); this "
                "turn starts a new conversation.",
            )
        )
        return None, None

    async def _before_load(self) -> None:
        """Gemini CLI 0.61 breaks a thread loaded in the UTC minute it was created in
        (``AgentRecipe.load_minute_guard``): wait for the next minute, unless interrupted."""
        since = self._thread_since
        if not self._provider.recipe.load_minute_guard or since is None:
            return
        now = datetime.now(UTC)
        since = since.replace(tzinfo=UTC) if since.tzinfo is None else since.astimezone(UTC)
        minute = since.replace(second=0, microsecond=0)
        if now.replace(second=0, microsecond=0) > minute:
            return
        wait = (minute + timedelta(minutes=1) - now).total_seconds() + 0.5
        log.info(
            "waiting %.1f s before loading thread %s (same-minute guard)", wait, self._thread_id
        )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._interrupt_requested.wait()

    async def _replay_over(self, client: AgentClient) -> None:
        deadline = time.monotonic() + REPLAY_LIMIT_S
        while time.monotonic() < deadline:
            quiet = time.monotonic() - client.last_update
            if quiet >= REPLAY_QUIET_S:
                return
            await asyncio.sleep(REPLAY_QUIET_S - quiet)

    async def _watch(self, process: ManagedProcess) -> None:
        """The agent's end, as the running turn's last item."""
        returncode = await process.wait()
        cli = self._cli
        error = self._exceeded(process)
        if error is None:
            tail = process.stderr_tail.strip()
            error = TurnError(
                kind="cli_crashed",
                message=f"{cli} {how_it_ended(returncode, suffix=' during the turn')}.",
                retryable=True,
                provider=self._name,
                exit_code=returncode,
                stderr_tail=tail[-2000:] or None,
            )
        if self._inbox is not None:
            self._inbox.put_nowait(_Exited(error))

    def _stop_grace_s(self) -> float:
        # An agent that ignores stdin EOF gets no grace: it would only delay the signals.
        return self._provider.settings.stop_grace_s if self._provider.recipe.exits_on_eof else 0.0

    async def _release(self, live: _Live, *, at_once: bool = False) -> None:
        self._pending.cancel_all()
        await super()._release(live, at_once=at_once)

    async def _disconnect(self, live: _Live) -> None:
        await live.connection.close()

    # --- turns ----------------------------------------------------------------------------

    def _turn_begins(self) -> None:
        self._interrupt_requested.clear()

    def _turn_ended(self) -> None:
        self._inbox = None
        self._pending.cancel_all()

    async def _prompt(self, live: _Live, prompt: str, loop: TurnLoop[_Item]) -> TurnOutcome:
        assert live.thread is not None
        await self._prompt_gap()
        inbox: asyncio.Queue[_Item] = asyncio.Queue()
        self._inbox = inbox
        self._translator.begin()
        with self._output_limited(live):
            answer = asyncio.create_task(
                live.connection.prompt(session_id=live.thread, prompt=[text_block(prompt)]),
                name=f"acp-prompt:{live.thread}",
            )
            answer.add_done_callback(lambda task: inbox.put_nowait(_Answered(task)))
            try:
                return await self._follow(live, loop, inbox)
            finally:
                if not answer.done():
                    answer.cancel()

    async def _prompt_gap(self) -> None:
        gap = self._provider.recipe.prompt_gap_after_cancel_s
        if gap and self._cancelled_at is not None:
            wait = self._cancelled_at + gap - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        self._cancelled_at = None

    async def _handle(self, live: _Live, loop: TurnLoop[_Item], item: _Item) -> TurnOutcome | None:
        translator = self._translator
        match item:
            case Asked(request=request) as asked:
                events, approval = translator.permission(request)
                await _emit(loop, events)
                loop.ask(approval, permission_reply(translator, asked))
                return None
            case Elicited(form=form) as elicited:
                loop.ask_question(form.request, form_reply(elicited))
                return None
            case _Answered(task=task):
                return await self._answered(live, loop, task)
            case _Exited(error=error):
                await self._release(live)
                events, outcome = translator.fail(error, interrupted=loop.interrupted)
                await _emit(loop, events)
                return loop.interrupted_outcome() if loop.interrupted else outcome
        await _emit(loop, translator.update(item))
        if isinstance(item, UsageUpdate) and (so_far := translator.usage_so_far()) is not None:
            await loop.hooks.report_usage(so_far)
        return None

    async def _answered(
        self, live: _Live, loop: TurnLoop[_Item], task: asyncio.Task[Any]
    ) -> TurnOutcome | None:
        translator = self._translator
        provider = self._provider
        if task.cancelled():
            return None
        exc = task.exception()
        if exc is None:
            events, outcome = translator.finish(task.result(), interrupted=loop.interrupted)
        elif isinstance(exc, RequestError):
            error = faults.from_rpc_error(provider.name, exc.code, str(exc), exc.data)
            events, outcome = translator.fail(error, interrupted=loop.interrupted)
            if loop.interrupted:
                outcome = loop.interrupted_outcome()
        elif isinstance(exc, ConnectionError):
            return None  # the agent is gone: its watcher reports how it ended
        else:
            raise exc
        await _emit(loop, events)
        return outcome

    async def interrupt(self) -> None:
        self._interrupt_requested.set()
        if self._loop is not None:
            self._loop.interrupt()
        self._pending.cancel_all()
        live = self._live
        if live is None or live.thread is None:
            return
        self._cancelled_at = time.monotonic()
        with contextlib.suppress(ConnectionError, RequestError):
            await live.connection.cancel(session_id=live.thread)


async def _emit(loop: TurnLoop[_Item], events: list[EventData]) -> None:
    for event in events:
        await loop.hooks.emit(event)
