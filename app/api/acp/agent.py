"""The gateway as an ACP agent: each protocol method as the command or read its REST route
runs (docs/acp.md).

    initialize                 the protocol version both speak, what the gateway offers
    session/new                Sessions.create (within the key's quota), then followed
    session/load               replay of the session's events (after ``_meta.agentGateway.after``),
                               answered at its end, then live
    session/resume             followed from now (or ``after``), no replay
    session/list, close, fork  reads.list_sessions, Close, Fork
    session/set_mode,
    session/set_config_option  Configure (approval mode, model, provider before the first turn)
    session/prompt             StartTurn, answered at the turn's end with its stop reason
    session/cancel             Interrupt
    _agentGateway/awaitTurn    a turn's stop reason once it ends (a prompt cut by a reconnect)

A refused command is the ``GatewayError`` its REST route answers with, sent as a JSON-RPC
error: ``-32002`` for what does not exist, ``-32602`` for another 4xx, ``-32603`` otherwise;
its ``message`` is the problem's detail and its ``data`` the problem (masked: a problem may
quote a secret).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    AudioContentBlock,
    ClientCapabilities,
    CloseSessionResponse,
    EmbeddedResourceContentBlock,
    ForkSessionResponse,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    TextContentBlock,
)
from starlette.requests import HTTPConnection

from app import __version__
from app.api.acp.answers import Refusals, after_of, answer_of, title_of
from app.api.acp.attached import AttachedSession, Client
from app.api.acp.options import (
    DEFAULT_MODEL,
    GATEWAY_META,
    MODE_OPTION,
    MODEL_OPTION,
    PROVIDER_OPTION,
    McpServers,
    config_options,
    gateway_meta,
    invalid_params,
    invalid_request,
    new_session_request,
    prompt_text,
    refused_mcp_servers,
    session_modes,
)
from app.api.acp.prompts import PromptBook, prompt_id_of
from app.api.deps import admit_session, issuer
from app.api.security import Principal
from app.errors import GatewayError, NoTurnRunning
from app.masking import SecretMask
from app.records import SessionRecord
from app.runtime import reads
from app.runtime.commands import Close, Configure, Fork, Interrupt, StartTurn
from app.runtime.sessions import Sessions
from app.settings import Settings

log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002
LIST_PAGE = 100
AWAIT_TURN = "agentGateway/awaitTurn"


class GatewayAgent:
    """One ACP connection's agent: the sessions it follows, as its key may reach them."""

    def __init__(
        self,
        *,
        manager: Sessions,
        settings: Settings,
        principal: Principal,
        connection: HTTPConnection,
        mask: SecretMask,
        prompts: PromptBook,
    ) -> None:
        self._manager = manager
        self._prompts = prompts
        self._settings = settings
        self._principal = principal
        self._issuer = issuer(principal)
        self._connection = connection
        self._mask = mask
        self._client: Client | None = None
        self._forms = False
        self._initialized = False
        self._attached: dict[str, AttachedSession] = {}

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    # --- the connection -------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        elicitation = getattr(client_capabilities, "elicitation", None)
        self._forms = getattr(elicitation, "form", None) is not None
        self._initialized = True
        log.info(
            "ACP client %s initialized (protocol %d)",
            getattr(client_info, "name", "unnamed"),
            protocol_version,
        )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                    fork=SessionForkCapabilities(),
                ),
            ),
            auth_methods=[],
            agent_info=Implementation(
                name="agent-gateway", title="Agent Gateway", version=__version__
            ),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        raise invalid_params(
            {
                "detail": "the gateway offers no authentication methods: the connection is "
                "authenticated by its bearer key"
            }
        )

    async def close(self) -> None:
        """The connection ended: stop following (the sessions go on)."""
        for attached in list(self._attached.values()):
            await attached.close()
        self._attached.clear()

    # --- sessions -------------------------------------------------------------------------

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: McpServers = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        self._check_ready()
        self._check_mcp(mcp_servers)
        request = new_session_request(cwd, gateway_meta(kwargs), owner=self._principal.name)
        async with (
            self._call(),
            admit_session(self._connection, self._manager, self._principal),
        ):
            row = await self._manager.create(request)
        attached = await self._attach(row, after=row.last_seq)
        if mcp_servers:  # the operator lets them be dropped (acp.client_mcp_servers)
            names = ", ".join(server.name for server in mcp_servers)
            attached.say_soon(
                f"The gateway does not pass MCP servers from the editor to the agent; these "
                f"were left out: {names}."
            )
        modes, options = await self._choices(row)
        return NewSessionResponse(
            session_id=row.id,
            modes=modes,
            config_options=options,
            field_meta={GATEWAY_META: {"seq": row.last_seq}},
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: McpServers = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        modes, options, seq = await self._reopen(session_id, mcp_servers, kwargs, replay=True)
        return LoadSessionResponse(
            modes=modes, config_options=options, field_meta={GATEWAY_META: {"seq": seq}}
        )

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: McpServers = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        modes, options, seq = await self._reopen(session_id, mcp_servers, kwargs, replay=False)
        return ResumeSessionResponse(
            modes=modes, config_options=options, field_meta={GATEWAY_META: {"seq": seq}}
        )

    async def _reopen(
        self, session_id: str, mcp_servers: McpServers, kwargs: dict[str, Any], *, replay: bool
    ) -> tuple[Any, list[Any], int]:
        """Follow an existing session on this connection: from ``_meta.agentGateway.after``,
        else from its first event (``replay``: ``session/load``) or from now
        (``session/resume``); answered once the events up to now are sent, then what it
        still asks is asked again. Its modes, options and the seq the client is at."""
        self._check_ready()
        self._check_mcp(mcp_servers)
        row = await self._session(session_id)
        after = after_of(gateway_meta(kwargs), default=0 if replay else row.last_seq)
        attached = await self._attach(row, after=after)
        await attached.replayed.wait()
        attached.ask_pending()
        modes, options = await self._choices(row)
        return modes, options, attached.last_seq

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: McpServers = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        self._check_ready()
        self._check_mcp(mcp_servers)
        async with (
            self._call(),
            admit_session(self._connection, self._manager, self._principal),
        ):
            row = await self._manager.execute(Fork(session_id=session_id), self._issuer)
        await self._attach(row, after=row.last_seq)
        modes, options = await self._choices(row)
        return ForkSessionResponse(
            session_id=row.id,
            modes=modes,
            config_options=options,
            field_meta={GATEWAY_META: {"seq": row.last_seq}},
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        self._check_ready()
        before = None
        if cursor is not None:
            try:
                before = datetime.fromisoformat(cursor)
            except ValueError:
                raise invalid_params(
                    {"detail": "cursor: pass the nextCursor of the previous page"}
                ) from None
        async with self._call():
            rows = await reads.list_sessions(
                self._manager,
                owner=self._principal.owner_filter,
                status=None,
                limit=LIST_PAGE,
                before=before,
            )
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=row.id,
                    cwd=row.workspace,
                    title=title_of(row),
                    updated_at=row.updated_at.isoformat(),
                    field_meta={GATEWAY_META: {"provider": row.provider, "status": row.status}},
                )
                for row in rows
                if cwd is None or row.workspace == cwd
            ],
            next_cursor=rows[-1].created_at.isoformat() if len(rows) == LIST_PAGE else None,
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        self._check_ready()
        async with self._call():
            await self._manager.execute(Close(session_id=session_id), self._issuer)
        attached = self._attached.pop(session_id, None)
        if attached is not None:
            await attached.close()
        return CloseSessionResponse()

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        self._check_ready()
        await self._configure(Configure(session_id=session_id, approval_mode=mode_id))  # type: ignore[arg-type]
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        self._check_ready()
        if not isinstance(value, str):
            raise invalid_params({"detail": f"{config_id}: pick one of its values"})
        match config_id:
            case "mode":
                command = Configure(session_id=session_id, approval_mode=value)  # type: ignore[arg-type]
            case "model":
                command = Configure(
                    session_id=session_id, model=None if value == DEFAULT_MODEL else value
                )
            case "provider":
                command = Configure(session_id=session_id, provider=value)
            case _:
                raise invalid_params(
                    {
                        "detail": f"unknown config option {config_id!r}: the gateway offers "
                        f"{MODE_OPTION!r}, {MODEL_OPTION!r} and {PROVIDER_OPTION!r}"
                    }
                )
        row = await self._configure(command)
        _, options = await self._choices(row)
        return SetSessionConfigOptionResponse(config_options=options)

    # --- turns ----------------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        prompt: list[
            TextContentBlock
            | ImageContentBlock
            | AudioContentBlock
            | ResourceContentBlock
            | EmbeddedResourceContentBlock
        ],
        **kwargs: Any,
    ) -> PromptResponse:
        self._check_ready()
        attached = self._followed(session_id)
        text = prompt_text(prompt)
        prompt_id = prompt_id_of(gateway_meta(kwargs))

        async def start() -> str:
            attached.expect_echo(text)
            try:
                async with self._call():
                    turn = await self._manager.execute(
                        StartTurn(session_id=session_id, prompt=text), self._issuer
                    )
            except BaseException:
                attached.forget_echo(text)
                raise
            return turn.id

        if prompt_id is None:
            answer = answer_of(await attached.turn_end(await start()))
        else:  # sent again under its id: the turn it started, ended or not
            turn_id, _ = await self._prompts.turn_for(session_id, prompt_id, start)
            async with self._call():
                answer = await attached.answer(turn_id)
        return PromptResponse.model_validate(answer)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        try:
            await self._manager.execute(Interrupt(session_id=session_id), self._issuer)
        except NoTurnRunning:
            pass
        except GatewayError as exc:
            log.info("session/cancel of %s not taken: %s", session_id[:64], exc.detail)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != AWAIT_TURN:
            raise RequestError.method_not_found(f"_{method}")
        self._check_ready()
        session_id, turn_id = params.get("sessionId"), params.get("turnId")
        if not isinstance(session_id, str) or not isinstance(turn_id, str):
            raise invalid_params({"detail": "give sessionId and turnId (strings)"})
        async with self._call():
            return await self._followed(session_id).answer(turn_id)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.info("ignored ACP notification _%s", method[:64])

    # --- helpers --------------------------------------------------------------------------

    def _check_ready(self) -> None:
        if not self._initialized:
            raise invalid_request({"detail": "call initialize first"})

    def _check_mcp(self, servers: McpServers) -> None:
        refused = refused_mcp_servers(servers or [], self._settings.acp.client_mcp_servers)
        if refused is not None:
            raise invalid_params({"detail": refused})

    async def _session(self, session_id: str) -> SessionRecord:
        async with self._call():
            return await self._manager.get(session_id, owner=self._principal.owner_filter)

    async def _attach(self, row: SessionRecord, *, after: int) -> AttachedSession:
        """Follow ``row``'s events after ``after`` for this client (again, after a reload)."""
        assert self._client is not None
        previous = self._attached.pop(row.id, None)
        if previous is not None:
            await previous.close()
        attached = AttachedSession(
            session_id=row.id,
            client=self._client,
            manager=self._manager,
            issuer=self._issuer,
            owner=self._principal.owner_filter,
            forms=self._forms,
            workspace=row.workspace,
        )
        after = min(after, row.last_seq)
        primed_from = None
        if 0 < after < row.last_seq:
            async with self._call():
                primed_from = await reads.turn_started_at(self._manager, row.id, at_or_before=after)
        attached.attach(after=after, boundary=row.last_seq, primed_from=primed_from)
        self._attached[row.id] = attached
        return attached

    def _followed(self, session_id: str) -> AttachedSession:
        attached = self._attached.get(session_id)
        if attached is None:
            raise invalid_params(
                {
                    "detail": f"session {session_id[:64]} is not open on this connection: "
                    "session/load or session/resume it first"
                }
            )
        return attached

    async def _configure(self, command: Configure) -> SessionRecord:
        async with self._call():
            return await self._manager.execute(command, self._issuer)

    async def _choices(self, row: SessionRecord) -> tuple[Any, list[Any]]:
        async with self._call():
            turns = await reads.list_turns(
                self._manager, row.id, owner=self._principal.owner_filter, limit=1
            )
        providers = sorted(n for n, p in self._settings.providers.items() if p.enabled)
        options = config_options(
            row,
            self._settings,
            providers=providers,
            models=self._settings.acp.models.get(row.provider, []),
            started=bool(turns),
        )
        return session_modes(row, self._settings), options

    def _call(self) -> Refusals:
        return Refusals(self._mask)
