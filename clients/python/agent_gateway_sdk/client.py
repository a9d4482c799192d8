"""The blocking client: ``Client`` and the resources it hands out (``AsyncClient`` in
``aio`` is the same API with ``await``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from agent_gateway_sdk import _api
from agent_gateway_sdk._calls import DEFAULT_URL, Call, build, headers, result
from agent_gateway_sdk._outcomes import (
    ApprovalReply,
    QuestionReply,
    TurnOutcome,
    approval_answer,
    asks_approval,
    asks_question,
    ends_turn,
)
from agent_gateway_sdk._resources import Approvals, Providers, Questions, Runs, Turns
from agent_gateway_sdk._streaming import Backoff, OnControl, StopWhen, StreamState
from agent_gateway_sdk._sync_stream import EventStream
from agent_gateway_sdk.errors import ConnectionFailed
from agent_gateway_sdk.events import (
    ApprovalRequestedEvent,
    Event,
    EventPage,
    QuestionAskedEvent,
)
from agent_gateway_sdk.models import (
    ApprovalMode,
    Capability,
    Changes,
    InterruptAccepted,
    Readiness,
    Revert,
    SessionInfo,
    SessionStatus,
    Strategy,
    UsageReport,
)

T = TypeVar("T")

ApprovalHandler = Callable[[ApprovalRequestedEvent], ApprovalReply]
QuestionHandler = Callable[[QuestionAskedEvent], QuestionReply]


class Client:
    """A connection to one gateway: ``base_url`` (default ``$AGENT_GATEWAY_URL``, else
    ``http://127.0.0.1:8765``) with the bearer ``token`` (default ``$AGENT_GATEWAY_TOKEN``).

    ``timeout`` bounds each plain request; a stream that loses its connection reconnects
    for up to ``reconnect_timeout`` seconds, and counts a connection silent for
    ``stream_read_timeout`` seconds as lost (the gateway sends a keep-alive every 15 s).
    ``http_client`` replaces the ``httpx.Client`` it would make (its base URL and headers are
    then yours to set)."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        reconnect_timeout: float = 120.0,
        stream_read_timeout: float = 60.0,
        http_client: httpx.Client | None = None,
    ) -> None:
        url = base_url or os.environ.get("AGENT_GATEWAY_URL") or DEFAULT_URL
        key = token if token is not None else os.environ.get("AGENT_GATEWAY_TOKEN")
        self.http = http_client or httpx.Client(base_url=url, headers=headers(key), timeout=timeout)
        self.reconnect_timeout = reconnect_timeout
        self.stream_timeout = httpx.Timeout(timeout, read=stream_read_timeout)
        self.sessions = Sessions(self)
        self.runs = Runs(self)
        self.providers = Providers(self)

    def send(self, call: Call[T]) -> T:
        """Send one call; its result, or the ``ApiError`` its answer stands for."""
        try:
            response = self.http.send(build(self.http, call))
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"no answer from {self.http.base_url}: {exc!r}") from exc
        return result(call, response)

    def stream(
        self,
        method: str,
        path: str,
        *,
        after: int | None,
        on_control: OnControl | None,
        stop_when: StopWhen | None = None,
        json: dict[str, Any] | None = None,
    ) -> EventStream:
        """An event stream opened by ``method path`` and resumed on the session's events."""
        state = StreamState(after=after, on_control=on_control, stop_when=stop_when)
        first = self.http.build_request(
            method, path, json=json, headers=state.headers(), timeout=self.stream_timeout
        )
        return EventStream(
            self.http, first, self._resume, state, Backoff(timeout_s=self.reconnect_timeout)
        )

    def _resume(self, state: StreamState) -> httpx.Request:
        if state.session_id is None:
            raise ConnectionFailed("the stream was lost before its first event")
        path = _api.session_path(state.session_id, "events")
        return self.http.build_request(
            "GET", path, headers=state.headers(), timeout=self.stream_timeout
        )

    def usage(self, *, from_: datetime | None = None, to: datetime | None = None) -> UsageReport:
        """Tokens and cost by key, provider and model over ``[from_, to)`` (an admin key)."""
        return self.send(_api.usage(from_=from_, to=to))

    def ready(self) -> Readiness:
        """``/readyz``: whether the gateway can serve turns now, and why not."""
        return self.send(_api.readiness())

    def alive(self) -> bool:
        """``/healthz``: the gateway answers."""
        return self.send(_api.liveness()).get("status") == "ok"

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class Sessions:
    """``client.sessions``: create, find and close sessions."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self,
        *,
        workspace: str | os.PathLike[str] | None = None,
        repository: str | os.PathLike[str] | None = None,
        ref: str | None = None,
        branch: str | None = None,
        provider: str | None = None,
        scenario: str | None = None,
        strategy: Strategy | None = None,
        model: str | None = None,
        approval_mode: ApprovalMode | None = None,
        retry: _api.RetryArg = None,
        requires: Sequence[Capability] | None = None,
        fallback: bool | None = None,
        metadata: Mapping[str, Any] | None = None,
        budget: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """A new session in ``workspace`` (or a worktree of its own of ``repository``);
        every other field left out takes the gateway's default."""
        call = _api.create_session(
            workspace=os.fspath(workspace) if workspace is not None else None,
            repository=os.fspath(repository) if repository is not None else None,
            ref=ref,
            branch=branch,
            provider=provider,
            scenario=scenario,
            strategy=strategy,
            model=model,
            approval_mode=approval_mode,
            retry=retry,
            requires=requires,
            fallback=fallback,
            metadata=metadata,
            budget=budget,
            idempotency_key=idempotency_key,
        )
        return Session(self._client, self._client.send(call))

    def get(self, session_id: str) -> Session:
        return Session(self._client, self._client.send(_api.get_session(session_id)))

    def list(
        self,
        *,
        status: SessionStatus | None = None,
        limit: int | None = None,
        before: datetime | None = None,
        provider: str | None = None,
        q: str | None = None,
    ) -> list[Session]:
        """A page of sessions, newest first; continue with ``before`` = the last
        ``info.created_at``. ``provider`` and ``q`` narrow it: ``q`` finds sessions with
        every one of its words in the title, id, workspace, repository or branch."""
        found = self._client.send(
            _api.list_sessions(status=status, limit=limit, before=before, provider=provider, q=q)
        )
        return [Session(self._client, info) for info in found]

    def delete(self, session_id: str) -> SessionInfo:
        """Close the session: its running turn ends, its CLI stops; its history stays."""
        return self._client.send(_api.delete_session(session_id))


class Session:
    """One session: ``info`` is what the gateway last said about it (``refresh()`` asks
    again); its turns, approvals, questions and events hang off it."""

    def __init__(self, client: Client, info: SessionInfo) -> None:
        self._client = client
        self.id = info.id
        self.info = info
        self.turns = Turns(client, self.id)
        self.approvals = Approvals(client, self.id)
        self.questions = Questions(client, self.id)

    def __repr__(self) -> str:
        return f"<Session {self.id} {self.info.provider} {self.info.status}>"

    def refresh(self) -> SessionInfo:
        self.info = self._client.send(_api.get_session(self.id))
        return self.info

    def delete(self) -> SessionInfo:
        """Close the session (``DELETE``)."""
        self.info = self._client.send(_api.delete_session(self.id))
        return self.info

    def interrupt(self) -> InterruptAccepted:
        """Stop the running turn; it ends with ``turn.interrupted``."""
        return self._client.send(_api.interrupt(self.id))

    def fork(self, *, at_turn: str | None = None) -> Session:
        """A new session holding this one's files and conversation up to ``at_turn``
        (default: the last completed turn)."""
        return Session(self._client, self._client.send(_api.fork_session(self.id, at_turn=at_turn)))

    def configure(
        self,
        *,
        model: str | None = None,
        approval_mode: ApprovalMode | None = None,
        provider: str | None = None,
    ) -> SessionInfo:
        """Change the session's model, approval mode or (before its first turn) provider
        while no turn runs; the next turn runs with them."""
        call = _api.configure_session(
            self.id, model=model, approval_mode=approval_mode, provider=provider
        )
        self.info = self._client.send(call)
        return self.info

    def revert(self, to_turn: str) -> Revert:
        """Put the workspace's files back as they were when ``to_turn`` started."""
        return self._client.send(_api.revert_session(self.id, to_turn=to_turn))

    def changes(self, *, from_: str | None = None, to: str | None = None) -> Changes:
        """What changed between ``from_`` (``start`` or a turn id: its start) and ``to``
        (``now`` or a turn id: its end)."""
        return self._client.send(_api.changes(self.id, from_=from_, to=to))

    def patch(self, *, from_: str | None = None, to: str | None = None) -> str:
        """The same changes as a patch ``git apply`` takes (binary files included)."""
        return self._client.send(_api.patch(self.id, from_=from_, to=to))

    def events(
        self, after: int | None = None, *, on_control: OnControl | None = None
    ) -> EventStream:
        """The session's events after seq ``after`` (default: from its first), then live,
        until the session closes; reconnecting as needed, each event once. ``on_control``
        hears the control frames; without it, a gap in the kept events raises
        ``EventsSkipped``."""
        path = _api.session_path(self.id, "events")
        return self._client.stream("GET", path, after=after, on_control=on_control)

    def events_page(self, *, after: int | None = None, limit: int | None = None) -> EventPage:
        """One JSON page of stored events (no live tail)."""
        return self._client.send(_api.events_page(self.id, after=after, limit=limit))

    def run(
        self,
        prompt: str,
        *,
        on_approval: ApprovalHandler | None = None,
        on_question: QuestionHandler | None = None,
        on_event: Callable[[Event], object] | None = None,
        retry: _api.RetryArg = None,
    ) -> TurnOutcome:
        """Start a turn and follow it to its end: each approval it asks for goes to
        ``on_approval`` (its reply is sent; ``None`` leaves it pending), each question to
        ``on_question``, every event to ``on_event``. Returns the ended turn and its events."""
        after = self.refresh().last_seq
        turn = self.turns.start(prompt, retry=retry)
        seen: list[Event] = []
        with self.events(after=after, on_control=lambda _frame: None) as stream:
            for event in stream:
                if event.turn_id != turn.id:
                    continue
                seen.append(event)
                if on_event is not None:
                    on_event(event)
                if on_approval is not None and (asked := asks_approval(event, turn.id)):
                    answer = approval_answer(on_approval(asked))
                    if answer is not None:
                        self.approvals.respond(
                            asked.data.approval_id,
                            answer.decision,
                            message=answer.message,
                            updated_input=answer.updated_input,
                        )
                if on_question is not None and (question := asks_question(event, turn.id)):
                    answers = on_question(question)
                    if answers is not None:
                        self.questions.answer(question.data.question_id, answers)
                if ends_turn(event, turn.id):
                    break
        return TurnOutcome(turn=self.turns.get(turn.id), events=seen)
