"""The blocking client's resources below a session (turns, approvals, questions) and beside
it (runs, providers)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agent_gateway_sdk import _api
from agent_gateway_sdk._streaming import OnControl
from agent_gateway_sdk._sync_stream import EventStream
from agent_gateway_sdk.events import TURN_END_TYPES, Event
from agent_gateway_sdk.models import (
    Approval,
    ApprovalMode,
    ApprovalStatus,
    Capability,
    Decision,
    Provider,
    QuestionRequest,
    QuestionStatus,
    RunResult,
    Strategy,
    Turn,
)

if TYPE_CHECKING:
    from agent_gateway_sdk.client import Client


class Turns:
    """``session.turns``: start one, read them."""

    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self._session_id = session_id

    def start(
        self, prompt: str, *, retry: _api.RetryArg = None, idempotency_key: str | None = None
    ) -> Turn:
        """Start a turn (202); ``ConflictError`` ``turn_in_progress`` while one runs. With
        ``idempotency_key``, the same call sent again starts no second turn."""
        call = _api.start_turn(
            self._session_id, prompt=prompt, retry=retry, idempotency_key=idempotency_key
        )
        return self._client.send(call)

    def get(self, turn_id: str) -> Turn:
        return self._client.send(_api.get_turn(self._session_id, turn_id))

    def list(self, *, limit: int | None = None, before: int | None = None) -> list[Turn]:
        """Turns, newest first; continue with ``before`` = the last ``number``."""
        return self._client.send(_api.list_turns(self._session_id, limit=limit, before=before))


class Approvals:
    """``session.approvals``: the tool calls the agent asked to make."""

    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self._session_id = session_id

    def list(
        self,
        *,
        status: ApprovalStatus | None = None,
        limit: int | None = None,
        before: datetime | None = None,
    ) -> list[Approval]:
        call = _api.list_approvals(self._session_id, status=status, limit=limit, before=before)
        return self._client.send(call)

    def respond(
        self,
        approval_id: str,
        decision: Decision,
        *,
        message: str | None = None,
        updated_input: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Approval:
        """Allow, deny (``message`` tells the agent why) or allow for the session."""
        call = _api.respond_approval(
            self._session_id,
            approval_id,
            decision=decision,
            message=message,
            updated_input=updated_input,
            idempotency_key=idempotency_key,
        )
        return self._client.send(call)


class Questions:
    """``session.questions``: what the agent asked the user."""

    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self._session_id = session_id

    def list(
        self,
        *,
        status: QuestionStatus | None = None,
        limit: int | None = None,
        before: datetime | None = None,
    ) -> list[QuestionRequest]:
        call = _api.list_questions(self._session_id, status=status, limit=limit, before=before)
        return self._client.send(call)

    def answer(
        self,
        question_id: str,
        answers: Sequence[_api.AnswerArg],
        *,
        idempotency_key: str | None = None,
    ) -> QuestionRequest:
        """One answer per question, in order: ``{"selected": [label, …]}`` and/or
        ``{"text": …}`` (or ``Answer`` objects)."""
        return self._client.send(
            _api.answer_question(
                self._session_id, question_id, answers=answers, idempotency_key=idempotency_key
            )
        )


class Runs:
    """``client.runs``: one prompt in a new session, failing over along the chain."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self,
        *,
        prompt: str,
        workspace: str | os.PathLike[str],
        provider: str | None = None,
        scenario: str | None = None,
        strategy: Strategy | None = None,
        model: str | None = None,
        approval_mode: ApprovalMode | None = None,
        retry: _api.RetryArg = None,
        requires: Sequence[Capability] | None = None,
        fallback: bool | None = None,
        budget: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> RunResult:
        """Run the prompt and wait for its result."""
        sent = _api.run_body(
            prompt=prompt,
            workspace=os.fspath(workspace),
            provider=provider,
            scenario=scenario,
            strategy=strategy,
            model=model,
            approval_mode=approval_mode,
            retry=retry,
            requires=requires,
            fallback=fallback,
            budget=budget,
        )
        return self._client.send(_api.create_run(sent, idempotency_key))

    def stream(
        self,
        *,
        prompt: str,
        workspace: str | os.PathLike[str],
        provider: str | None = None,
        scenario: str | None = None,
        strategy: Strategy | None = None,
        model: str | None = None,
        approval_mode: ApprovalMode | None = None,
        retry: _api.RetryArg = None,
        requires: Sequence[Capability] | None = None,
        fallback: bool | None = None,
        budget: Mapping[str, Any] | None = None,
        on_control: OnControl | None = None,
    ) -> EventStream:
        """Run the prompt and stream its session's events until its turn ends (a lost
        connection resumes on the session's events)."""
        sent = _api.run_body(
            prompt=prompt,
            workspace=os.fspath(workspace),
            provider=provider,
            scenario=scenario,
            strategy=strategy,
            model=model,
            approval_mode=approval_mode,
            retry=retry,
            requires=requires,
            fallback=fallback,
            budget=budget,
        )
        return self._client.stream(
            "POST", "/v1/runs", json=sent, after=None, on_control=on_control, stop_when=_turn_ended
        )


def _turn_ended(event: Event) -> bool:
    return event.type in TURN_END_TYPES


class Providers:
    """``client.providers``: what each agent can do, its version and health."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self, *, fresh: bool | None = None) -> list[Provider]:
        return self._client.send(_api.list_providers(fresh=fresh))

    def get(self, name: str, *, fresh: bool | None = None) -> Provider:
        return self._client.send(_api.get_provider(name, fresh=fresh))
