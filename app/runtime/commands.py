"""What a client (or the gateway itself) asks of a live session, as values.

    StartTurn · Interrupt · Respond (an approval) · Answer (a question) · Revert · Fork ·
    Configure · Close

Each command is a frozen value naming its session; the REST routes and the WebSocket frames
build the same ones, ``Sessions.execute(command, issuer)`` runs them (app/runtime/sessions.py),
and a replica that does not hold the session sends the same command, encoded here, to the one
that does (app/runtime/clustered.py). The ``Issuer`` is the key that asked: it decides which
sessions a command may reach, never anything inside the command.

The one encoding:

    encode(command)  ─►  (kind, {field: JSON})  ─►  decode(kind, fields)  ─►  the same command

This module is at the bottom of the runtime: it imports nothing else of it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import JsonValue, TypeAdapter, ValidationError

from app.cluster.commands import Issuer
from app.errors import InvalidRequest
from app.events import ApprovalDecision, ApprovalMode, QuestionAnswer
from app.records import ApprovalRecord, RevertRecord, SessionRecord, TurnRecord

__all__ = [
    "GATEWAY",
    "Answer",
    "Close",
    "Command",
    "Configure",
    "Fork",
    "Interrupt",
    "Issuer",
    "Respond",
    "Revert",
    "SessionCommand",
    "StartTurn",
    "decode",
    "decode_result",
    "encode",
    "record_from",
]

R = TypeVar("R")

GATEWAY = Issuer(name="admin", admin=True)
"""The gateway acting on its own behalf (a one-shot run's turn and cleanup): any session."""


@dataclass(frozen=True, kw_only=True)
class SessionCommand(Generic[R]):
    """A command on one session; ``R`` is what executing it answers."""

    kind: ClassVar[str]
    """Its name in the encoding."""
    result: ClassVar[type[Any]]
    """The type of its answer (a record, or ``str``), to read an answer sent back."""
    session_id: str


@dataclass(frozen=True, kw_only=True)
class StartTurn(SessionCommand[TurnRecord]):
    """Start a turn with ``prompt``; answers the queued turn (409 while another runs)."""

    kind: ClassVar[str] = "start_turn"
    result: ClassVar[type[Any]] = TurnRecord
    prompt: str
    retry: dict[str, JsonValue] | None = None
    """The turn's retry policy, over the session's (None: the session's)."""
    idempotency_key: str | None = None
    """The client's key for this request: sent again with it, it gets the first answer
    (app/api/idempotency.py); not part of what the command asks."""


@dataclass(frozen=True, kw_only=True)
class Interrupt(SessionCommand[str]):
    """Ask the CLI to stop the running turn; answers its id."""

    kind: ClassVar[str] = "interrupt"
    result: ClassVar[type[Any]] = str


@dataclass(frozen=True, kw_only=True)
class Respond(SessionCommand[ApprovalRecord]):
    """Decide a pending approval; the issuer's name is recorded as who decided."""

    kind: ClassVar[str] = "respond"
    result: ClassVar[type[Any]] = ApprovalRecord
    approval_id: str
    decision: ApprovalDecision
    message: str | None = None
    updated_input: dict[str, JsonValue] | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class Answer(SessionCommand[ApprovalRecord]):
    """Answer the agent's pending question: one answer per question, in the order asked."""

    kind: ClassVar[str] = "answer_question"
    result: ClassVar[type[Any]] = ApprovalRecord
    question_id: str
    answers: tuple[QuestionAnswer, ...]
    idempotency_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class Revert(SessionCommand[RevertRecord]):
    """Put the workspace's files back as they were when turn ``to_turn`` started (409 while
    a turn runs); answers what the revert changed. The agent's next prompt is told."""

    kind: ClassVar[str] = "revert"
    result: ClassVar[type[Any]] = RevertRecord
    to_turn: str


@dataclass(frozen=True, kw_only=True)
class Fork(SessionCommand[SessionRecord]):
    """Make a new session of the same owner and settings whose workspace holds the files and
    whose conversation holds the turns up to ``at_turn`` (default: the last completed one);
    409 while a turn runs. Answers the new session; it runs on the replica that ran this
    one."""

    kind: ClassVar[str] = "fork"
    result: ClassVar[type[Any]] = SessionRecord
    at_turn: str | None = None


@dataclass(frozen=True, kw_only=True)
class Configure(SessionCommand[SessionRecord]):
    """Change the session's model, approval mode or provider for its next turns (None: as
    it is; at least one is given, else 422); 409 while a turn runs, and no turn starts until
    it is done. The provider changes only before the session's first turn. Answers the
    session as it is now (app/runtime/configuring.py)."""

    kind: ClassVar[str] = "configure"
    result: ClassVar[type[Any]] = SessionRecord
    model: str | None = None
    approval_mode: ApprovalMode | None = None
    provider: str | None = None


@dataclass(frozen=True, kw_only=True)
class Close(SessionCommand[SessionRecord]):
    """Stop the session's turn and process group and close its event stream (it stays
    readable); answers the closed session."""

    kind: ClassVar[str] = "delete"
    result: ClassVar[type[Any]] = SessionRecord


Command = StartTurn | Interrupt | Respond | Answer | Revert | Fork | Configure | Close
"""Every command a session takes."""

_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    cls.kind: TypeAdapter(cls)
    for cls in (StartTurn, Interrupt, Respond, Answer, Revert, Fork, Configure, Close)
}
"""Each command's validator and encoder, by its kind."""


def encode(command: Command) -> tuple[str, dict[str, Any]]:
    """The command's kind and its fields as JSON values."""
    fields: dict[str, Any] = _ADAPTERS[command.kind].dump_python(command, mode="json")
    return command.kind, fields


def decode(kind: str, fields: Mapping[str, Any]) -> Command:
    """The command ``encode`` gave ``kind`` and ``fields`` for; ``InvalidRequest`` when they
    are not one."""
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        raise InvalidRequest(f"no command {kind!r}")
    try:
        command: Command = adapter.validate_python(dict(fields))
    except ValidationError as exc:
        raise InvalidRequest(f"invalid {kind} command: {exc.error_count()} error(s)") from None
    return command


def decode_result(command: SessionCommand[R], data: Any) -> R:
    """What ``command`` answered, read back from its JSON (as sent between replicas)."""
    if command.result is str:
        return typing.cast(R, str(data))
    return typing.cast(R, record_from(command.result, data))


def record_from(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """A record dataclass back from its JSON (datetimes from ISO text)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        value = data.get(field.name)
        if value is not None and _is_datetime(hints[field.name]):
            value = datetime.fromisoformat(value)
        values[field.name] = value
    return cls(**values)


def _is_datetime(hint: Any) -> bool:
    if hint is datetime:
        return True
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return datetime in typing.get_args(hint)
    return False
