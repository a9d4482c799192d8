"""One gateway session followed on one ACP connection: its events become the client's
``session/update``\\ s, its approvals and questions the client's requests.

    attach(after, boundary)   a subscription of the session's events with seq > ``after``
      events up to ``boundary`` (the session's last seq when attached): the history replay
        of ``session/load``, sent as updates; approvals and questions in it are not asked
        (``replayed`` is set once past it; the ones still pending are asked once the load
        is answered, ``ask_pending``)
      later events: live updates; an ``approval.requested`` is a ``session/request_permission``,
        a ``question.asked`` an ``elicitation/create`` form (a message to a client that
        cannot show forms); the turn's end answers its ``session/prompt`` (``answer``)

A subscription that ends early (the follower fell behind, a replica moved) is opened again
after the last seq sent: nothing is lost or sent twice. A dropped connection never touches
the session: its turn goes on, and its approvals wait for a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from typing import Any, Protocol

from acp import RequestError
from acp.schema import AgentMessageChunk, ElicitationFormSessionMode, TextContentBlock

from app.api.acp.answers import answer_of, ended
from app.api.acp.interaction import (
    answers_from,
    decision_for,
    elicitation_form,
    permission_options,
    tool_call_for_approval,
)
from app.api.acp.options import GATEWAY_META
from app.api.acp.updates import UpdateTranslator
from app.errors import GatewayError
from app.events.interaction import ApprovalRequested, QuestionAsked
from app.runtime import reads
from app.runtime.approvals import asked, requested
from app.runtime.commands import Answer, Issuer, Respond
from app.runtime.sessions import Sessions
from app.runtime.subscription import (
    Degraded,
    Evicted,
    LoggedEvent,
    Recovered,
    ResyncRequired,
    ShuttingDown,
)

log = logging.getLogger(__name__)

TURN_ENDS = frozenset({"turn.completed", "turn.failed", "turn.interrupted"})
TURN_DONE = frozenset({"completed", "failed", "interrupted"})
END_LOGGED_S = 5.0
"""How long an ended turn's end event may take to be logged before its row answers for it."""
ENDED_KEPT = 64
"""Turn ends a follower remembers for ``turn_end`` (a prompt awaits its own at once)."""
PENDING_PAGE = 100


class Client(Protocol):
    """What a follower needs of the client's side of the connection (the SDK's
    ``AgentSideConnection``)."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None: ...

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any: ...

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any: ...


class AttachedSession:
    """A session's events, followed for one client."""

    def __init__(
        self,
        *,
        session_id: str,
        client: Client,
        manager: Sessions,
        issuer: Issuer,
        owner: str | None,
        forms: bool,
        workspace: str,
    ) -> None:
        self.session_id = session_id
        self._workspace = workspace
        self._client = client
        self._manager = manager
        self._issuer = issuer
        self._owner = owner
        self._forms = forms
        self._translator = UpdateTranslator(cwd=workspace)
        self.last_seq = 0
        self._quiet_until = 0
        self._boundary = 0
        self._echoes: list[str] = []
        self.replayed = asyncio.Event()
        self._ended: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._asks: dict[str, asyncio.Task[None]] = {}
        self._follower: asyncio.Task[None] | None = None
        self.gone: str | None = None
        """Why the session can no longer be followed (closed, the gateway shutting down)."""

    # --- following ------------------------------------------------------------------------

    def attach(self, *, after: int, boundary: int, primed_from: int | None = None) -> None:
        """Follow the events after ``after``; those up to ``boundary`` are history. From
        ``primed_from`` (the start of the turn ``after`` falls in) to ``after``, events are
        read and not sent: what the translator must know of the turn's earlier part (which
        messages streamed) to send its rest once."""
        self.last_seq = after if primed_from is None else min(after, primed_from - 1)
        self._quiet_until = after
        self._boundary = boundary
        if boundary <= after:
            self.replayed.set()
        self._follower = asyncio.create_task(self._follow(), name=f"acp-follow-{self.session_id}")

    async def _follow(self) -> None:
        try:
            while self.gone is None:
                subscription = await self._manager.events.open(
                    self.session_id, after=self.last_seq, transport="acp", holder=self._issuer
                )
                try:
                    await self._drain(subscription)
                finally:
                    subscription.release()
        except GatewayError as exc:
            self._end(f"the session's events cannot be followed: {exc.detail}")
        except (ConnectionError, RequestError):
            self._end("the client's connection closed")
        finally:
            self.replayed.set()

    async def _drain(self, subscription: Any) -> None:
        async for item in subscription:
            match item:
                case LoggedEvent(json=text):
                    await self._on_event(json.loads(text))
                case ResyncRequired(first_seq=first):
                    await self.say(
                        f"Events before #{first} of this session are no longer kept; the "
                        "history shown starts there."
                    )
                case Evicted():
                    return  # opened again after the last seq sent
                case ShuttingDown():
                    self._end("the gateway is shutting down")
                    return
                case Degraded() | Recovered():
                    continue
        self._end("the session is closed")

    def expect_echo(self, prompt: str) -> None:
        """This client sent ``prompt``: its editor shows it already, so the turn's
        ``user_message_chunk`` is not sent back."""
        self._echoes.append(prompt)

    def forget_echo(self, prompt: str) -> None:
        """``prompt`` started no turn (it was refused): a later turn with the same text,
        from another client, is shown."""
        if prompt in self._echoes:
            self._echoes.remove(prompt)

    async def _on_event(self, event: dict[str, Any]) -> None:
        seq = event["seq"]
        live = seq > self._boundary
        sent = self._translator.updates_for(event)
        if event["type"] == "turn.started" and live and event["data"].get("prompt") in self._echoes:
            self._echoes.remove(event["data"]["prompt"])
            sent = [u for u in sent if u.session_update != "user_message_chunk"]
        if seq > self._quiet_until:
            for update in sent:
                await self._client.session_update(self.session_id, update)
        self.last_seq = seq
        kind, data = event["type"], event["data"]
        if kind in TURN_ENDS and event.get("turn_id"):
            self._turn_ended(event["turn_id"], event)
        elif kind == "approval.requested" and live:
            self._ask_approval(ApprovalRequested.model_validate(data), event.get("turn_id"))
        elif kind == "question.asked" and live:
            self._ask_question(QuestionAsked.model_validate(data), event.get("turn_id"))
        elif kind in ("approval.resolved", "question.resolved"):
            asked = self._asks.pop(data.get("approval_id") or data.get("question_id"), None)
            if asked is not None:
                asked.cancel()
        if not self.replayed.is_set() and seq >= self._boundary:
            self.replayed.set()

    def _end(self, why: str) -> None:
        if self.gone is None:
            self.gone = why
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_exception(
                    RequestError.internal_error({"detail": f"the turn's end is unknown: {why}"})
                )

    # --- turns ----------------------------------------------------------------------------

    def _turn_ended(self, turn_id: str, event: dict[str, Any]) -> None:
        self._ended[turn_id] = event
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)
        waiter = self._waiters.pop(turn_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(event)

    async def turn_end(self, turn_id: str) -> dict[str, Any]:
        """The end event of ``turn_id``, once it has come (every update before it sent)."""
        if turn_id in self._ended:
            return self._ended[turn_id]
        if self.gone is not None:
            raise RequestError.internal_error({"detail": f"the turn's end is unknown: {self.gone}"})
        waiter = self._waiters.get(turn_id)
        if waiter is None:
            waiter = self._waiters[turn_id] = asyncio.get_running_loop().create_future()
        return await asyncio.shield(waiter)

    async def answer(self, turn_id: str) -> dict[str, Any]:
        """What ``session/prompt`` answers for ``turn_id`` once it has ended (at once when
        it has): from its end event, followed or read from the log; from the turn's row when
        the log no longer holds its end."""
        turn = await reads.get_turn(self._manager, self.session_id, turn_id, owner=self._owner)
        if turn.status not in TURN_DONE or turn_id in self._ended:
            return answer_of(await self.turn_end(turn_id))
        logged = await reads.turn_end(self._manager, self.session_id, turn_id)
        if logged is not None:
            return answer_of(json.loads(logged.json))
        try:  # a turn's row says it ended just before its end event is logged
            async with asyncio.timeout(END_LOGGED_S):
                return answer_of(await self.turn_end(turn_id))
        except TimeoutError:
            return ended(turn)

    # --- approvals and questions ----------------------------------------------------------

    def ask_pending(self) -> None:
        """Ask, once the replay is answered, what was requested before it ended and still
        waits for an answer (the same approval or question id as before a reconnect)."""
        task = asyncio.create_task(self._ask_pending(), name=f"acp-pending-{self.session_id}")
        self._track(f"pending:{self.session_id}", task)

    async def _ask_pending(self) -> None:
        approvals = await reads.list_approvals(
            self._manager, self.session_id, owner=self._owner, status="pending", limit=PENDING_PAGE
        )
        questions = await reads.list_questions(
            self._manager, self.session_id, owner=self._owner, status="pending", limit=PENDING_PAGE
        )
        for row in sorted([*approvals, *questions], key=lambda r: r.created_at):
            if row.id in self._asks:
                continue
            if row.kind == "question":
                self._ask_question(asked(row), row.turn_id)
            else:
                self._ask_approval(requested(row), row.turn_id)

    def _ask_approval(self, data: ApprovalRequested, turn_id: str | None) -> None:
        self._track(data.approval_id, self._permission(data, turn_id))

    def _ask_question(self, data: QuestionAsked, turn_id: str | None) -> None:
        self._track(data.question_id, self._question(data, turn_id))

    def _track(self, ask_id: str, asking: Any) -> None:
        if ask_id in self._asks:
            asking.close() if asyncio.iscoroutine(asking) else asking.cancel()
            return
        task = (
            asking
            if isinstance(asking, asyncio.Task)
            else asyncio.create_task(asking, name=f"acp-ask-{ask_id}")
        )
        self._asks[ask_id] = task
        task.add_done_callback(lambda done: self._settled(ask_id, done))

    def _settled(self, ask_id: str, task: asyncio.Task[Any]) -> None:
        """An ask ended: forgotten, and a failure logged (nothing else awaits it: a request
        that could not be built would otherwise never be asked, and never be told of)."""
        if self._asks.get(ask_id) is task:
            del self._asks[ask_id]
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("asking %s of the ACP client failed", ask_id, exc_info=error)

    async def _permission(self, data: ApprovalRequested, turn_id: str | None) -> None:
        options = permission_options(data.options)
        meta = {GATEWAY_META: {"approvalId": data.approval_id, "turnId": turn_id}}
        tool_call = tool_call_for_approval(data, cwd=self._workspace)
        try:
            answer = await self._client.request_permission(
                self.session_id, tool_call, options, **meta
            )
        except (RequestError, ConnectionError) as exc:
            log.info("approval %s: the ACP client did not answer (%s)", data.approval_id, exc)
            return
        decision = decision_for(answer, data.options)
        command = Respond(
            session_id=self.session_id, approval_id=data.approval_id, decision=decision
        )
        await self._run(command)

    async def _question(self, data: QuestionAsked, turn_id: str | None) -> None:
        meta = {GATEWAY_META: {"questionId": data.question_id, "turnId": turn_id}}
        form = elicitation_form(data)
        if not self._forms:
            await self.say(
                f"The agent asks: {form.message}\n(Answer it in the gateway's console or with "
                f"POST /v1/sessions/{self.session_id}/questions/{data.question_id}.)"
            )
            return
        mode = ElicitationFormSessionMode(
            mode="form",
            session_id=self.session_id,
            requested_schema=form.requested_schema,
            tool_call_id=data.tool_id,
        )
        try:
            reply = await self._client.create_elicitation(form.message, mode, **meta)
        except (RequestError, ConnectionError) as exc:
            log.info("question %s: the ACP client did not answer (%s)", data.question_id, exc)
            return
        if getattr(reply, "action", None) != "accept":
            return  # declined here: it waits for an answer from elsewhere until it expires
        answers = answers_from(data, reply.content or {})
        await self._run(
            Answer(session_id=self.session_id, question_id=data.question_id, answers=answers)
        )

    async def _run(self, command: Respond | Answer) -> None:
        try:
            await self._manager.execute(command, self._issuer)
        except GatewayError as exc:  # answered elsewhere first, expired, the session closed
            log.info("an ACP client's answer was not taken: %s", exc.detail)

    def say_soon(self, text: str) -> None:
        """``say`` ``text`` once the request being answered has been (the client knows the
        session by then)."""
        task = asyncio.create_task(self.say(text), name=f"acp-say-{self.session_id}")
        self._track(f"say:{id(task)}", task)

    async def say(self, text: str) -> None:
        """A notice from the gateway to the client, as an agent message."""
        chunk = AgentMessageChunk(
            session_update="agent_message_chunk",
            content=TextContentBlock(type="text", text=text),
            field_meta={GATEWAY_META: {"notice": True}},
        )
        with contextlib.suppress(ConnectionError, RequestError):
            await self._client.session_update(self.session_id, chunk)

    async def close(self) -> None:
        """Stop following (the connection ended or the client closed the session)."""
        self._end("the client's connection closed")
        tasks = [t for t in (self._follower, *self._asks.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
