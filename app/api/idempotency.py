"""``Idempotency-Key``: the POSTs that start work or answer the agent (sessions, turns, runs,
approval and question answers), and the WebSocket frames that build the same commands
(``idempotency_key``), answer a copy sent with the same key once: the first answer again,
status and body, marked ``Idempotent-Replayed: true`` (app/runtime/idempotency.py keeps it).

    no key                      ─► run, answer
    key, new                    ─► run; a success (2xx) is kept 24 h, anything else frees the key
    key, answered, same request ─► the kept answer (nothing runs)
    key, in flight              ─► 409 idempotency_key_in_use, Retry-After: 1
    key, another request        ─► 422 idempotency_key_reused

A command's request is the command itself (its encoding, without the key), so a turn started
over the WebSocket and sent again over REST with the same key is the same request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Header
from fastapi.responses import Response
from pydantic import BaseModel

from app.api.deps import issuer
from app.api.fields import IDEMPOTENCY_KEY_PATTERN
from app.api.security import Principal
from app.errors import StorageUnavailable
from app.runtime.commands import Answer, Respond, StartTurn, encode
from app.runtime.idempotency import Claim, IdempotencyKeys, Stored, fingerprint
from app.runtime.sessions import Sessions

log = logging.getLogger(__name__)

R = TypeVar("R")

JSON = "application/json"
REPLAYED = "Idempotent-Replayed"
"""Set (``true``) on an answer that was kept for its key and is sent again."""

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="Send the request again with the same key (1 to 255 visible ASCII "
        "characters, a UUID say) to get its first answer instead of a second effect: kept "
        "24 hours per API key. A copy sent while the first is answered gets 409 "
        "`idempotency_key_in_use` (Retry-After); the key used with another body, 422 "
        "`idempotency_key_reused`. A kept answer carries `Idempotent-Replayed: true`.",
    ),
]
REPLAY_HEADERS: dict[str, Any] = {
    "headers": {
        REPLAYED: {
            "description": "`true` when this is the answer kept for the request's "
            "Idempotency-Key, sent again (absent otherwise)",
            "schema": {"type": "string", "enum": ["true"]},
        }
    }
}
"""The success response's headers of a route that takes ``Idempotency-Key``."""
IN_FLIGHT = "is still being answered (`idempotency_key_in_use`, see Retry-After)"
REUSED = "an Idempotency-Key used for another request (`idempotency_key_reused`)"
"""What the routes' documented 409 and 422 say of their idempotency key."""
IdempotentCommand = StartTurn | Respond | Answer
"""The session commands that take an idempotency key."""


@dataclass(frozen=True, kw_only=True)
class Answered:
    """The answer to a request: run now, or kept for its key and sent again."""

    answer: Stored
    replayed: bool

    def response(self) -> Response:
        headers = {REPLAYED: "true"} if self.replayed else None
        answer = self.answer
        return Response(
            answer.body, status_code=answer.status, media_type=answer.media_type, headers=headers
        )


def keys_of(manager: Sessions) -> IdempotencyKeys:
    return IdempotencyKeys(manager.store, manager.settings, clock=manager.clock)


async def begin(
    manager: Sessions, principal: Principal, key: str, *, request: str, asked: Any
) -> Claim | Stored:
    """Claim ``key`` for the request ``asked`` (JSON values), or the answer kept for it."""
    return await keys_of(manager).begin(
        principal.name, key, request=request, fingerprint=fingerprint(asked)
    )


async def finish(claim: Claim, answer: Stored) -> None:
    """Keep ``answer`` for the key; a database that cannot take it now does not take the
    answer from the client (copies sent later get 409 until the key expires)."""
    try:
        await claim.finish(answer)
    except StorageUnavailable:
        log.warning("the answer to an idempotent request could not be kept", exc_info=True)


async def once(
    manager: Sessions,
    principal: Principal,
    key: str | None,
    *,
    request: str,
    asked: Any,
    status: int,
    produce: Callable[[], Awaitable[BaseModel]],
) -> Answered:
    """Answer the request ``asked`` with ``produce``'s body and ``status``, once per key."""
    if key is None:
        body = (await produce()).model_dump_json()
        return Answered(answer=Stored(status=status, media_type=JSON, body=body), replayed=False)
    begun = await begin(manager, principal, key, request=request, asked=asked)
    if isinstance(begun, Stored):
        return Answered(answer=begun, replayed=True)
    # The answer is made and kept even if this request is cancelled meanwhile (its client
    # left, a timeout): the copy the client sends next gets it instead of a second effect.
    answering = asyncio.create_task(_answer(begun, status, produce), name=f"answer:{key}")
    answering.add_done_callback(_retrieved)
    return Answered(answer=await asyncio.shield(answering), replayed=False)


async def _answer(claim: Claim, status: int, produce: Callable[[], Awaitable[BaseModel]]) -> Stored:
    """``produce``'s answer, kept for the claimed key; the key freed if there is none."""
    try:
        body = (await produce()).model_dump_json()
    except BaseException:
        await claim.release()
        raise
    answer = Stored(status=status, media_type=JSON, body=body)
    await finish(claim, answer)
    return answer


def _retrieved(task: asyncio.Task[Stored]) -> None:
    """A failure is answered by the request that waits for the task (and it freed the key);
    one whose request has gone is not worth a warning of its own."""
    if not task.cancelled():
        task.exception()


async def execute_once(
    manager: Sessions,
    principal: Principal,
    command: IdempotentCommand,
    *,
    render: Callable[[Any], BaseModel],
) -> Answered:
    """Run ``command`` as ``principal`` once per its ``idempotency_key``; ``render`` makes
    the body of what it answered, with its REST route's status (on every transport, so a
    copy sent over another gets the same)."""
    kind, fields = encode(command)
    key = fields.pop("idempotency_key", None)

    async def produce() -> BaseModel:
        return render(await manager.execute(command, issuer(principal)))

    return await once(
        manager,
        principal,
        key,
        request=f"{kind} {command.session_id}",
        asked={"command": kind, **fields},
        status=202 if isinstance(command, StartTurn) else 200,
        produce=produce,
    )
