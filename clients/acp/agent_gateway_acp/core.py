"""The relay's protocol logic, without I/O: each message from the editor or the gateway, and
each connection made or lost, goes in; the lines for the editor and the frames for the
gateway come out, in order.

A connection's life::

    offline ──connected()──► restoring ──(initialize, every session/load answered)──► live
       ▲                         │                                                     │
       └──────────────────── disconnected() ◄──────────────────────────────────────────┘

While not live, what the editor sends waits in the outbox. Restoring a new connection:
``initialize`` as the editor sent it (the answer is the relay's), ``session/load`` of each
open session after the last ``seq`` relayed (the missed updates reach the editor, deduplicated
by ``seq``), then, live: a ``session/prompt`` the lost connection never answered is answered
through ``_agentGateway/awaitTurn`` (or sent again under its ``promptId`` when no update named
its turn yet), lost reads are sent again, the outbox goes out. Any other request of the lost
connection is answered with an error at once: the editor may try it again.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from agent_gateway_acp import asks, messages
from agent_gateway_acp.book import RESENDABLE, Book, Pending, Prompt, opened
from agent_gateway_acp.messages import (
    INTERNAL_ERROR,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)

log = logging.getLogger(__name__)

LOST = "the connection to the gateway was lost; try again"
AWAIT_TURN = "_agentGateway/awaitTurn"
METHOD_NOT_FOUND = -32601


@dataclass(frozen=True, slots=True)
class ToEditor:
    text: str


@dataclass(frozen=True, slots=True)
class ToGateway:
    text: str
    generation: int
    """The connection it is meant for: never sent on another one."""


Output = ToEditor | ToGateway


@dataclass(frozen=True, slots=True)
class _Initialize:
    editors: bool
    """The editor's own ``initialize`` (its answer goes to the editor), not the relay's."""


@dataclass(frozen=True, slots=True)
class _Reload:
    session_id: str


class RelayCore:
    """The state of one editor's relay across its connections to the gateway."""

    def __init__(self, *, new_prompt_id: Callable[[], str] | None = None) -> None:
        self.generation = 0
        """The current connection's number; 0 before the first."""
        self.phase: Literal["offline", "restoring", "live"] = "offline"
        self._new_prompt_id = new_prompt_id or (lambda: uuid.uuid4().hex)
        self._book = Book()
        self._asks = asks.Asks()
        self._initialize: Pending | None = None
        self._initialized = False
        self._outbox: list[tuple[str, Pending | None]] = []
        self._steps: dict[RequestId, _Initialize | _Reload] = {}
        self._awaits: dict[RequestId, RequestId] = {}
        """An ``awaitTurn`` of the relay → the editor's ``session/prompt`` it answers."""
        self._ids = itertools.count(1)

    @property
    def live(self) -> bool:
        """Connected, with the editor's sessions reopened."""
        return self.phase == "live"

    @property
    def waiting(self) -> int:
        """Messages from the editor waiting for a connection."""
        return len(self._outbox)

    @property
    def sessions(self) -> int:
        return len(self._book.sessions)

    # --- the editor -------------------------------------------------------------------

    def from_editor(self, text: str) -> list[Output]:
        message = messages.parse(text)
        if isinstance(message, Response) and self._asks.owns(message):
            connected = self.generation if self.phase != "offline" else None
            answer = self._asks.answered(message, generation=connected)
            return [] if answer is None else [ToGateway(answer.text, self.generation)]
        if isinstance(message, Request):
            return self._editor_request(message)
        if isinstance(message, Notification) and message.method == "session/cancel":
            session_id = messages.text_field(message.params, "sessionId")
            prompt = self._book.running_prompt(session_id) if session_id else None
            if prompt is not None:
                prompt.cancelled = True
        return self._send(text, None)

    def _editor_request(self, request: Request) -> list[Output]:
        text = request.text
        prompt = None
        session_id = messages.text_field(request.params, "sessionId")
        if request.method == "session/prompt" and session_id is not None:
            prompt_id = messages.text_field(messages.gateway_meta(request.params), "promptId")
            if prompt_id is None:
                prompt_id = self._new_prompt_id()
                params = messages.with_gateway_meta(request.params, promptId=prompt_id)
                text = messages.encode({**request.message, "params": params})
            prompt = Prompt(session_id=session_id, prompt_id=prompt_id)
        elif request.method == "session/load" and session_id is not None:
            # The editor asks for the history itself: what it sees starts over.
            self._book.seqs.pop(session_id, None)
            after = messages.as_seq(messages.gateway_meta(request.params).get("after"))
            self._book.advance(session_id, after)
        pending = Pending(request=request, text=text, prompt=prompt)
        if request.method == "initialize":
            self._initialize, self._initialized = pending, False
        self._book.pending[request.id] = pending
        return self._send(text, pending)

    def _send(self, text: str, pending: Pending | None) -> list[Output]:
        if self.phase != "live":
            self._outbox.append((text, pending))
            return []
        if pending is not None:
            pending.state = "sent"
        return [ToGateway(text, self.generation)]

    # --- the gateway ------------------------------------------------------------------

    def from_gateway(self, text: str) -> list[Output]:
        message = messages.parse(text)
        if isinstance(message, Response):
            step = self._steps.pop(message.id, None)
            if step is not None:
                return self._restored(step, message)
            prompt_id = self._awaits.pop(message.id, None)
            if prompt_id is not None:
                return self._turn_ended(prompt_id, message)
            pending = self._book.pending.pop(message.id, None)
            if pending is not None:
                self._answered(pending, message)
            return self._to_editor(message)
        if isinstance(message, Request):
            asked = self._asks.asked(message, generation=self.generation)
            if isinstance(asked, asks.ToEditor):
                return [ToEditor(asked.text)]
            return [] if asked is None else [ToGateway(asked.text, self.generation)]
        if (
            isinstance(message, Notification)
            and message.method == "session/update"
            and not self._relays_update(message)
        ):
            return []
        return self._to_editor(message)

    def _relays_update(self, update: Notification) -> bool:
        """Whether the editor gets ``update``: not when it has seen its ``seq`` already, nor
        when it is the replayed text of a prompt the editor is waiting on."""
        session_id = messages.text_field(update.params, "sessionId")
        if session_id is None:
            return True
        meta = messages.gateway_meta(update.params) or messages.gateway_meta(
            update.params.get("update")
        )
        seq = messages.as_seq(meta.get("seq"))
        if seq is not None:
            last = self._book.seqs.get(session_id)
            if last is not None and seq <= last:
                log.debug("update %s of session %s relayed already; skipped", seq, session_id)
                return False
            self._book.seqs[session_id] = seq
        prompt = self._book.running_prompt(session_id)
        turn_id = messages.text_field(meta, "turnId")
        if prompt is None or turn_id is None:
            return True
        prompt_id = messages.text_field(meta, "promptId")
        if prompt_id is not None and prompt_id != prompt.prompt_id:
            return True
        prompt.turn_id = turn_id
        kind = messages.text_field(update.params.get("update"), "sessionUpdate")
        return kind != "user_message_chunk"

    def _answered(self, pending: Pending, response: Response) -> None:
        request = pending.request
        if request.method == "initialize":
            self._initialized = True
            if response.failed:
                self._initialize = None
        if response.failed:
            return
        session = opened(request, response.result)
        if session is not None:
            self._book.sessions[session.id] = session
            self._book.advance(session.id, messages.seq_of(response.result))
        elif request.method == "session/close":
            closed = messages.text_field(request.params, "sessionId")
            self._book.sessions.pop(closed or "", None)
            self._book.seqs.pop(closed or "", None)
        elif pending.prompt is not None:
            self._book.advance(pending.prompt.session_id, messages.seq_of(response.result))

    def _to_editor(self, message: Message) -> list[Output]:
        line = messages.one_line(message)
        if line is None:
            log.warning("the gateway sent a frame that is neither one line nor JSON; dropped")
            return []
        return [ToEditor(line)]

    # --- connections ------------------------------------------------------------------

    def connected(self) -> list[Output]:
        """A new connection is open: start restoring what the editor had."""
        self.generation += 1
        self.phase = "restoring"
        self._steps.clear()
        self._awaits.clear()
        pending = self._initialize
        if pending is None or pending.state == "queued":
            return self._reload_sessions()
        if self._initialized:
            id = self._relay_id()
            self._steps[id] = _Initialize(editors=False)
            text = messages.request(id, "initialize", pending.request.params)
        else:
            self._steps[pending.request.id] = _Initialize(editors=True)
            pending.state, text = "sent", pending.text
        return [ToGateway(text, self.generation)]

    def disconnected(self) -> list[Output]:
        """The connection is gone: the editor's requests on it are answered with an error,
        except prompts and reads, which the next connection settles."""
        if self.phase == "offline":
            return []
        self.phase = "offline"
        self._steps.clear()
        self._awaits.clear()
        answers: list[Output] = []
        for id, pending in list(self._book.pending.items()):
            if pending.state != "sent":
                continue
            if pending.prompt is not None or pending.request.method in RESENDABLE:
                pending.state = "lost"
                continue
            del self._book.pending[id]
            answers.append(ToEditor(messages.error(id, INTERNAL_ERROR, LOST)))
        return answers

    def fail(self, code: int, message: str, data: object = None) -> list[Output]:
        """Answer every editor request still unanswered with this error (the relay stops)."""
        answers: list[Output] = [
            ToEditor(messages.error(id, code, message, data)) for id in self._book.pending
        ]
        self._book.pending.clear()
        self._outbox.clear()
        return answers

    def _relay_id(self) -> str:
        return f"agent-gateway-acp:{next(self._ids)}"

    def _reload_sessions(self) -> list[Output]:
        reloads: list[Output] = []
        for session in self._book.sessions.values():
            id = self._relay_id()
            self._steps[id] = _Reload(session.id)
            text = session.reopen(id=id, after=self._book.seqs.get(session.id))
            reloads.append(ToGateway(text, self.generation))
        if reloads:
            log.info("reopening %d session(s) on the new connection", len(reloads))
            return reloads
        return self._go_live()

    def _restored(self, step: _Initialize | _Reload, response: Response) -> list[Output]:
        if isinstance(step, _Initialize):
            outputs: list[Output] = []
            if step.editors:
                pending = self._book.pending.pop(response.id, None)
                if pending is not None:
                    self._answered(pending, response)
                outputs = self._to_editor(response)
            elif response.failed:
                log.warning("the gateway refused initialize: %s", response.error.get("message"))
            return outputs + self._reload_sessions()
        outputs = []
        if response.failed:
            reason = response.error.get("message") or "refused"
            log.warning("could not reopen session %s: %s", step.session_id, reason)
            self._book.sessions.pop(step.session_id, None)
            for id, pending in list(self._book.pending.items()):
                if pending.prompt is not None and pending.prompt.session_id == step.session_id:
                    del self._book.pending[id]
                    detail = f"the session could not be reopened after a reconnect: {reason}"
                    outputs.append(ToEditor(messages.error(id, INTERNAL_ERROR, detail)))
        else:
            self._book.advance(step.session_id, messages.seq_of(response.result))
        if not any(isinstance(step, _Reload) for step in self._steps.values()):
            outputs += self._go_live()
        return outputs

    def _go_live(self) -> list[Output]:
        self.phase = "live"
        outputs: list[Output] = []
        cancelling = {
            messages.text_field(message.params, "sessionId")
            for message in (messages.parse(text) for text, _ in self._outbox)
            if isinstance(message, Notification) and message.method == "session/cancel"
        }
        for pending in self._book.pending.values():
            if pending.state != "lost":
                continue
            pending.state = "sent"
            if pending.prompt is None:
                outputs.append(ToGateway(self._book.resend_text(pending), self.generation))
            else:
                cancelled = pending.prompt.session_id in cancelling
                outputs += self._resume_prompt(pending, pending.prompt, cancelled=cancelled)
        for text, queued in self._outbox:
            if queued is not None:
                queued.state = "sent"
            outputs.append(ToGateway(text, self.generation))
        self._outbox.clear()
        return outputs

    def _resume_prompt(self, pending: Pending, prompt: Prompt, *, cancelled: bool) -> list[Output]:
        """Settle a prompt of a lost connection: cancelled again if the editor cancelled it
        (unless its cancel waits in the outbox, ``cancelled``), answered by ``awaitTurn`` when
        its turn is known, else sent again under the same ``promptId`` (the gateway starts no
        second turn for it)."""
        outputs: list[Output] = []
        if prompt.cancelled and not cancelled:
            cancel = messages.notification("session/cancel", {"sessionId": prompt.session_id})
            outputs.append(ToGateway(cancel, self.generation))
        if prompt.turn_id is None:
            outputs.append(ToGateway(pending.text, self.generation))
            return outputs
        id = self._relay_id()
        self._awaits[id] = pending.request.id
        params = {"sessionId": prompt.session_id, "turnId": prompt.turn_id}
        outputs.append(ToGateway(messages.request(id, AWAIT_TURN, params), self.generation))
        return outputs

    def _turn_ended(self, prompt_id: RequestId, response: Response) -> list[Output]:
        pending = self._book.pending.pop(prompt_id, None)
        if pending is None:
            return []
        if response.failed and response.error.get("code") == METHOD_NOT_FOUND:
            detail = (
                "the connection to the gateway was lost during this prompt and the gateway "
                "cannot resume it; the turn may still be running"
            )
            return [ToEditor(messages.error(prompt_id, INTERNAL_ERROR, detail))]
        if pending.prompt is not None and not response.failed:
            self._book.advance(pending.prompt.session_id, messages.seq_of(response.result))
        return [ToEditor(messages.answer_with(response, prompt_id))]
