"""What the relay keeps about the editor's conversation with the gateway, to pick it up on a
new connection: the sessions the editor opened and the last ``seq`` relayed for each, and the
editor's requests the gateway has not answered yet."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agent_gateway_acp import messages
from agent_gateway_acp.messages import JsonObject, Request, RequestId

RESENDABLE = frozenset({"initialize", "session/load", "session/resume", "session/list"})
"""Requests sent again after a reconnect when the connection was lost before their answer:
they read, or reopen what the editor has open, so sending them twice changes nothing."""

OPENED_BY = frozenset({"session/new", "session/load", "session/resume", "session/fork"})

REOPEN_FIELDS = ("cwd", "mcpServers", "additionalDirectories")
"""The fields of the editor's own ``session/*`` request that a reload repeats."""


@dataclass(kw_only=True)
class Prompt:
    """A ``session/prompt`` the gateway has not answered yet."""

    session_id: str
    prompt_id: str
    """``_meta.agentGateway.promptId``: the relay's id for this prompt, unique across relays."""
    turn_id: str | None = None
    """The gateway's turn, once an update of it names it (``_meta.agentGateway.turnId``)."""
    cancelled: bool = False


@dataclass(kw_only=True)
class Pending:
    """An editor request the gateway has not answered yet."""

    request: Request
    text: str
    """The request as it goes to the gateway (a prompt carries its ``promptId``)."""
    state: Literal["queued", "sent", "lost"] = "queued"
    """Waiting for a connection; sent on the live one; sent on one that was lost."""
    prompt: Prompt | None = None


@dataclass(frozen=True, kw_only=True)
class OpenSession:
    id: str
    params: JsonObject
    """``cwd``, ``mcpServers`` and ``additionalDirectories`` as the editor gave them."""
    resumed: bool
    """Opened with ``session/resume`` (no history replayed to the editor)."""

    def reopen(self, *, id: RequestId, after: int | None) -> str:
        """The request that opens this session on a new connection and replays what the
        editor has not seen: ``session/load`` after ``after``, or (nothing seen, nothing
        replayed when it was opened) ``session/resume``."""
        params = {**self.params, "sessionId": self.id}
        if after is None and self.resumed:
            return messages.request(id, "session/resume", params)
        if after is not None:
            params = messages.with_gateway_meta(params, after=after)
        return messages.request(id, "session/load", params)


def opened(request: Request, answer: JsonObject) -> OpenSession | None:
    """The session an answered ``session/new``, ``load``, ``resume`` or ``fork`` opened."""
    if request.method not in OPENED_BY:
        return None
    if request.method in ("session/new", "session/fork"):
        session_id = messages.text_field(answer, "sessionId")
    else:
        session_id = messages.text_field(request.params, "sessionId")
    if session_id is None or messages.text_field(request.params, "cwd") is None:
        return None
    params = {name: request.params[name] for name in REOPEN_FIELDS if name in request.params}
    params.setdefault("mcpServers", [])
    return OpenSession(id=session_id, params=params, resumed=request.method == "session/resume")


@dataclass
class Book:
    """The sessions the editor has open and the editor's requests in flight."""

    sessions: dict[str, OpenSession] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)
    """The last ``seq`` relayed to the editor, by session."""
    pending: dict[RequestId, Pending] = field(default_factory=dict)

    def advance(self, session_id: str | None, seq: int | None) -> None:
        """The editor has seen ``session_id``'s stream up to ``seq``."""
        if session_id is not None and seq is not None:
            self.seqs[session_id] = max(seq, self.seqs.get(session_id, seq))

    def running_prompt(self, session_id: str) -> Prompt | None:
        """The prompt of ``session_id`` the gateway has received and not yet answered."""
        for pending in self.pending.values():
            prompt = pending.prompt
            if prompt is not None and prompt.session_id == session_id and pending.state != "queued":
                return prompt
        return None

    def resend_text(self, pending: Pending) -> str:
        """A lost request as it goes again; a ``session/load`` resumes after what it already
        replayed."""
        request = pending.request
        session_id = messages.text_field(request.params, "sessionId")
        after = self.seqs.get(session_id) if session_id is not None else None
        if request.method != "session/load" or after is None:
            return pending.text
        params = messages.with_gateway_meta(request.params, after=after)
        return messages.encode({**request.message, "params": params})
