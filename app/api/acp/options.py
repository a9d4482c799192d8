"""What an ACP client sends the gateway, read as the gateway takes it, and the session's
choices offered back: its approval modes (ACP session modes) and config options.

    session/new {cwd, mcpServers, _meta}  ─► a SessionRequest (``new_session_request``)
    session/prompt {prompt}               ─► the turn's prompt text (``prompt_text``)
    a session row                         ─► its modes and configOptions (``session_modes``,
                                             ``config_options``)
"""

from __future__ import annotations

from typing import Any

from acp import RequestError
from acp.schema import (
    AcpMcpServer,
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    ImageContentBlock,
    McpServerStdio,
    ResourceContentBlock,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    SseMcpServer,
    TextContentBlock,
    TextResourceContents,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.events import APPROVAL_MODES, ApprovalMode
from app.records import SessionRecord
from app.runtime.requests import SessionRequest
from app.settings import Settings

McpServers = list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio] | None
"""The MCP servers a client names in ``session/new``, ``load``, ``resume`` or ``fork``."""

GATEWAY_META = "agentGateway"
"""The key of the gateway's own part of an ACP message's ``_meta``."""

MODE_TITLES: dict[ApprovalMode, tuple[str, str]] = {
    "ask": ("Ask", "Ask before every tool call that changes something"),
    "auto_edits": ("Auto edits", "Edit files without asking; ask before anything else"),
    "allow_all": ("Allow all", "Run every tool call without asking"),
    "read_only": ("Read only", "Read and plan; change nothing"),
}
MODE_OPTION = "mode"
MODEL_OPTION = "model"
PROVIDER_OPTION = "provider"
DEFAULT_MODEL = "default"
"""The model option's value for the provider's own default model."""


class NewSessionMeta(BaseModel):
    """``session/new``'s ``_meta.agentGateway``: what ``POST /v1/sessions`` takes besides
    the workspace, and a workspace or repository in place of ``cwd``."""

    model_config = ConfigDict(extra="forbid")

    workspace: str | None = None
    repository: str | None = None
    ref: str | None = None
    branch: str | None = None
    provider: str | None = None
    scenario: str | None = None
    model: str | None = None
    approval_mode: ApprovalMode | None = None
    fallback: bool | None = None
    metadata: dict[str, Any] | None = Field(default=None, max_length=64)


def invalid_params(data: dict[str, Any]) -> RequestError:
    """``-32602`` whose message is what to fix (``data["detail"]``), not just "Invalid params"."""
    return RequestError(-32602, str(data.get("detail") or "Invalid params"), data)


def invalid_request(data: dict[str, Any]) -> RequestError:
    """``-32600`` whose message is what to fix (``data["detail"]``)."""
    return RequestError(-32600, str(data.get("detail") or "Invalid request"), data)


def gateway_meta(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The gateway's part of a request's ``_meta`` (the SDK spreads ``_meta`` into the
    handler's keyword arguments); refused unless it is an object."""
    meta = kwargs.get(GATEWAY_META)
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise invalid_params({"detail": f"_meta.{GATEWAY_META} must be an object"})
    return meta


def new_session_request(cwd: str, meta: dict[str, Any], *, owner: str | None) -> SessionRequest:
    """The session ``session/new`` asks for: in ``cwd``, or in ``_meta.agentGateway``'s
    workspace or repository (``Sessions.create`` checks them against the roots)."""
    try:
        wishes = NewSessionMeta.model_validate(meta)
    except ValidationError as exc:
        detail = "; ".join(
            f"_meta.{GATEWAY_META}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise invalid_params({"detail": detail}) from None
    workspace = wishes.workspace
    if wishes.repository is None and workspace is None:
        workspace = cwd
    return SessionRequest(
        workspace=workspace,
        repository=wishes.repository,
        ref=wishes.ref,
        branch=wishes.branch,
        provider=wishes.provider,
        scenario=wishes.scenario,
        model=wishes.model,
        approval_mode=wishes.approval_mode,
        fallback=wishes.fallback,
        metadata=wishes.metadata,
        owner=owner,
    )


def refused_mcp_servers(servers: list[Any], policy: str) -> str | None:
    """Why the client's MCP servers cannot be taken (None: there are none, or the operator
    lets them be dropped). A ``stdio`` server is a command to run on the gateway's machine:
    never started, whatever the policy."""
    if not servers:
        return None
    stdio = [s.name for s in servers if isinstance(s, McpServerStdio)]
    if stdio:
        return (
            f"MCP servers that are commands (stdio: {', '.join(stdio)}) are never started on "
            "the gateway's machine; configure MCP servers for the agent on the gateway instead"
        )
    if policy == "ignore":
        return None
    names = ", ".join(s.name for s in servers)
    return (
        f"the gateway does not take MCP servers from its clients ({names}); configure them "
        "for the agent on the gateway, or ask the operator to set acp.client_mcp_servers = "
        '"ignore" to have them dropped'
    )


def prompt_text(blocks: list[Any]) -> str:
    """The turn's prompt: the text blocks, a resource link as its URI, embedded text
    resources as fenced text. Images and audio are refused (not offered at ``initialize``)."""
    parts: list[str] = []
    for block in blocks:
        match block:
            case TextContentBlock(text=text):
                parts.append(text)
            case ResourceContentBlock(uri=uri, name=name):
                parts.append(f"@{uri}" if not name or name in uri else f"@{uri} ({name})")
            case EmbeddedResourceContentBlock(resource=TextResourceContents(uri=uri, text=text)):
                parts.append(f"{uri}:\n```\n{text}\n```")
            case ImageContentBlock() | AudioContentBlock() | EmbeddedResourceContentBlock():
                kind = getattr(block, "type", "content")
                raise invalid_params(
                    {"detail": f"the gateway takes text prompts only; remove the {kind} block"}
                )
    text = "\n\n".join(part for part in parts if part)
    if not text.strip():
        raise invalid_params({"detail": "the prompt has no text"})
    return text


def session_modes(row: SessionRecord, settings: Settings) -> SessionModeState:
    """The approval modes this gateway allows, as ACP session modes."""
    allowed = [m for m in APPROVAL_MODES if m in settings.sessions.allowed_approval_modes]
    return SessionModeState(
        current_mode_id=row.approval_mode,
        available_modes=[
            SessionMode(id=mode, name=MODE_TITLES[mode][0], description=MODE_TITLES[mode][1])
            for mode in allowed
        ],
    )


def config_options(
    row: SessionRecord,
    settings: Settings,
    *,
    providers: list[str],
    models: list[str],
    started: bool,
) -> list[SessionConfigOptionSelect]:
    """The session's choices: its approval mode, its model (the provider's default, the
    current one and ``acp.models`` of its provider), and its provider until its first
    turn (``providers``: those enabled)."""
    modes = session_modes(row, settings)
    options = [
        SessionConfigOptionSelect(
            id=MODE_OPTION,
            name="Approval mode",
            category="mode",
            type="select",
            current_value=modes.current_mode_id,
            options=[
                SessionConfigSelectOption(value=m.id, name=m.name, description=m.description)
                for m in modes.available_modes
            ],
        )
    ]
    offered = [DEFAULT_MODEL, *([row.model] if row.model else []), *models]
    options.append(
        SessionConfigOptionSelect(
            id=MODEL_OPTION,
            name="Model",
            category="model",
            type="select",
            current_value=row.model or DEFAULT_MODEL,
            options=[
                SessionConfigSelectOption(
                    value=name, name="Provider's default" if name == DEFAULT_MODEL else name
                )
                for name in dict.fromkeys(offered)
            ],
        )
    )
    if not started:
        options.append(
            SessionConfigOptionSelect(
                id=PROVIDER_OPTION,
                name="Agent",
                description="The agent behind the gateway (fixed once the session's first "
                "prompt runs)",
                type="select",
                current_value=row.provider,
                options=[
                    SessionConfigSelectOption(value=name, name=name)
                    for name in dict.fromkeys([row.provider, *providers])
                ],
            )
        )
    return options
