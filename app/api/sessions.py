"""REST routes for sessions, turns, approvals, questions and interrupts (thin: each builds a
command, app/runtime/commands.py, and the runtime decides)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status

from app.api.contract import links, problems
from app.api.deps import (
    Manager,
    admit_session,
    approval_public,
    issuer,
    question_public,
    session_public,
    turn_public,
)
from app.api.idempotency import (
    IN_FLIGHT,
    REPLAY_HEADERS,
    REUSED,
    IdempotencyKey,
    execute_once,
    once,
)
from app.api.schemas import (
    ApprovalList,
    ApprovalPublic,
    ApprovalRespond,
    ApprovalStatus,
    InterruptAccepted,
    QuestionList,
    QuestionPublic,
    QuestionReply,
    QuestionStatus,
    SessionConfigure,
    SessionCreate,
    SessionForkCreate,
    SessionList,
    SessionPublic,
    SessionStatus,
    Timestamp,
    TurnCreate,
    TurnList,
    TurnPublic,
)
from app.api.security import Authenticated
from app.runtime import reads
from app.runtime.commands import Answer, Close, Fork, Interrupt, Respond, StartTurn

NO_SESSION = "No such session (or not yours)"
STORAGE = "The database cannot be written now (`storage_unavailable`, see Retry-After)"
READ = problems(notes={404: NO_SESSION, 503: STORAGE})

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    operation_id="createSession",
    response_model=SessionPublic,
    responses={
        201: links(
            "getSession",
            "configureSession",
            "deleteSession",
            "createTurn",
            "listTurns",
            "listApprovals",
            "listQuestions",
            "interruptTurn",
            "getEvents",
            session_id="id",
        )
        | REPLAY_HEADERS,
        **problems(
            notes={
                409: "The `branch` asked for exists in the repository (`branch_exists`), or a "
                f"request with this Idempotency-Key {IN_FLIGHT}",
                422: "Invalid request: a workspace outside the roots or missing, both or neither "
                "of `workspace` and `repository`, a repository outside the roots or not a Git "
                "repository, a `ref` that names no commit or an invalid `branch` "
                "(`repository_rejected`), an unknown provider or capability, an approval mode "
                "or retry strategy not enabled, a usage-limit wait above the gateway's ceiling "
                f"(`ceiling_s`); or {REUSED}",
                429: "Creation rate or open-session cap of this key reached, or too many failed "
                "authentications from this address (see Retry-After)",
                503: "No provider available (`candidates` says why for each), or the database "
                "cannot be written now",
            }
        ),
    },
)
async def create_session(
    body: SessionCreate,
    request: Request,
    manager: Manager,
    principal: Authenticated,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Create a session on a provider, in a workspace inside a configured root, or in a Git
    worktree of its own of a repository inside one (``repository``, ``ref``, ``branch``)."""

    async def produce() -> SessionPublic:
        async with admit_session(request, manager, principal):
            row = await manager.create(
                body.session_request(owner=principal.name, metadata=body.metadata)
            )
        return await session_public(manager, row)

    answered = await once(
        manager,
        principal,
        idempotency_key,
        request="createSession",
        asked={"request": "createSession", "body": body.model_dump(mode="json")},
        status=status.HTTP_201_CREATED,
        produce=produce,
    )
    return answered.response()


@router.get("", operation_id="listSessions", responses=problems(notes={503: STORAGE}))
async def list_sessions(
    manager: Manager,
    principal: Authenticated,
    status_: Annotated[SessionStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[
        Timestamp | None, Query(description="Only sessions created before this time")
    ] = None,
    provider: Annotated[
        str | None, Query(max_length=64, description="Only sessions of this provider")
    ] = None,
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            description="Only sessions matching every word of this: each word found, "
            "case-insensitive, in the title, id, workspace, repository or branch",
        ),
    ] = None,
) -> SessionList:
    """Sessions, newest first (a non-admin key sees its own only); page with ``before`` = the
    last ``created_at`` you got, until a page is empty. A page may hold fewer than ``limit``
    sessions: it ends where it would pass ``limits.max_page_bytes``. ``status``,
    ``provider`` and ``q`` narrow it (all that are given must hold)."""
    rows = await reads.list_sessions(
        manager,
        owner=principal.owner_filter,
        status=status_,
        limit=limit,
        before=before,
        provider=provider,
        search=q,
    )
    usage = await reads.session_usage(manager, rows)  # one query for the page
    return SessionList(sessions=[await session_public(manager, row, usage[row.id]) for row in rows])


@router.get("/{session_id}", operation_id="getSession", responses=READ)
async def get_session(session_id: str, manager: Manager, principal: Authenticated) -> SessionPublic:
    row = await manager.get(session_id, owner=principal.owner_filter)
    return await session_public(manager, row)


@router.patch(
    "/{session_id}",
    operation_id="configureSession",
    responses=problems(
        notes={
            404: NO_SESSION,
            409: "The session is running a turn (`turn_in_progress`), is being reverted, forked "
            "or configured, or is closed (`session_closed`); `provider` after the session's "
            "first turn (`provider_fixed`)",
            422: "Invalid request: no field, a null or unknown field, an approval mode not "
            "enabled or that the provider refuses as configured (`approval_mode_refused`), a "
            "`model` for a provider without `model_choice` or a `provider` without the "
            "session's required capabilities (`capabilities_unmet`), an unknown provider",
            503: "The provider named is disabled or unavailable (`candidates` says why), or the "
            "database cannot be written now",
        }
    ),
)
async def configure_session(
    session_id: str, body: SessionConfigure, manager: Manager, principal: Authenticated
) -> SessionPublic:
    """Change the session's model, approval mode or provider for its next turns (each field
    left out stays as it is): the agent's idle process is closed, and the next turn starts
    it again with the new settings, in the same thread. The provider changes only before
    the first turn. Told as ``session.configured``."""
    row = await manager.execute(body.command(session_id), issuer(principal))
    return await session_public(manager, row)


@router.delete("/{session_id}", operation_id="deleteSession", responses=READ)
async def delete_session(
    session_id: str, manager: Manager, principal: Authenticated
) -> SessionPublic:
    """Close the session: stop its turn and its CLI process group; its history is kept. A
    session's worktree is removed (uncommitted changes in it are lost); its branch, with
    every commit on it, is kept in the repository (``branch``)."""
    row = await manager.execute(Close(session_id=session_id), issuer(principal))
    return await session_public(manager, row)


@router.post(
    "/{session_id}/fork",
    status_code=status.HTTP_201_CREATED,
    operation_id="forkSession",
    responses={
        201: links("getSession", "createTurn", "getEvents", session_id="id"),
        **problems(
            notes={
                404: "No such session (or not yours), or no such turn in it (`at_turn`)",
                409: "The session is running a turn (`turn_in_progress`), is already being "
                "forked (`fork_in_progress`) or is closed; `at_turn` did not complete, or the "
                "session has no completed turn (`turn_not_forkable`); the files after "
                "`at_turn` were not recorded (`snapshot_unavailable`); or the fork's branch "
                "exists (`branch_exists`)",
                422: "The session's workspace is gone, or its files cannot be copied "
                "(`workspace_rejected`)",
                429: "Creation rate or open-session cap of this key reached, or too many failed "
                "authentications from this address (see Retry-After)",
                503: STORAGE,
            }
        ),
    },
)
async def fork_session(
    session_id: str,
    body: SessionForkCreate,
    request: Request,
    manager: Manager,
    principal: Authenticated,
) -> SessionPublic:
    """Fork the session at a completed turn (default its last): a new session of the same
    owner, provider and settings, in a new worktree (or copy) of its workspace, whose
    conversation holds the turns up to that one: the agent's own fork of its thread where
    the provider has one (``fork`` in its capabilities), else a hand-off told before the new
    session's first prompt. ``session.forked`` is told on both sessions."""
    async with admit_session(request, manager, principal):
        row = await manager.execute(
            Fork(session_id=session_id, at_turn=body.at_turn), issuer(principal)
        )
    return await session_public(manager, row)


@router.post(
    "/{session_id}/turns",
    status_code=status.HTTP_202_ACCEPTED,
    operation_id="createTurn",
    response_model=TurnPublic,
    responses={
        202: links("getTurn", session_id="session_id", turn_id="id") | REPLAY_HEADERS,
        **problems(
            notes={
                402: "The session's budget is spent (`budget_exceeded`: `budget`, `measure`, "
                "`limit`, `used`); it does not reset",
                404: NO_SESSION,
                409: "A turn is already running (`turn_id` names it), the session is closed, "
                f"or a request with this Idempotency-Key {IN_FLIGHT}",
                422: "Invalid request, or a usage-limit wait above the gateway's ceiling "
                f"(`ceiling_s`); or {REUSED}",
                429: "The key's budget for this day or month is spent (`key_budget_exceeded`, "
                "`resets_at`), the session's owner holds its share of the live processes "
                "(`key_share_exceeded`), or too many failed authentications from this address "
                "(see Retry-After)",
                503: "The provider is disabled, every live-process slot is busy (for a key that "
                "is not an admin key: all but the admin reserve), or the database cannot be "
                "written now",
            }
        ),
    },
)
async def create_turn(
    session_id: str,
    body: TurnCreate,
    manager: Manager,
    principal: Authenticated,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Start a turn; follow it on the event stream. One turn at a time per session (else 409)."""
    retry = body.retry.model_dump(exclude_none=True) if body.retry else None
    command = StartTurn(
        session_id=session_id, prompt=body.prompt, retry=retry, idempotency_key=idempotency_key
    )
    answered = await execute_once(manager, principal, command, render=turn_public)
    return answered.response()


@router.get("/{session_id}/turns", operation_id="listTurns", responses=READ)
async def list_turns(
    session_id: str,
    manager: Manager,
    principal: Authenticated,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[
        int | None, Query(ge=1, le=2**31, description="Only turns numbered below this one")
    ] = None,
) -> TurnList:
    """Turns, newest first; page with ``before`` = the last ``number`` you got, until a page
    is empty (a page ends early where it would pass ``limits.max_page_bytes``)."""
    rows = await reads.list_turns(
        manager, session_id, owner=principal.owner_filter, limit=limit, before=before
    )
    return TurnList(turns=[turn_public(row) for row in rows])


@router.get(
    "/{session_id}/turns/{turn_id}",
    operation_id="getTurn",
    responses=problems(notes={404: "No such session or turn", 503: STORAGE}),
)
async def get_turn(
    session_id: str, turn_id: str, manager: Manager, principal: Authenticated
) -> TurnPublic:
    turn = await reads.get_turn(manager, session_id, turn_id, owner=principal.owner_filter)
    return turn_public(turn)


@router.get("/{session_id}/approvals", operation_id="listApprovals", responses=READ)
async def list_approvals(
    session_id: str,
    manager: Manager,
    principal: Authenticated,
    status_: Annotated[ApprovalStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[
        Timestamp | None, Query(description="Only approvals requested before this time")
    ] = None,
) -> ApprovalList:
    """Approvals, newest first; page with ``before`` = the last ``created_at`` you got, until
    a page is empty (a page ends early where it would pass ``limits.max_page_bytes``)."""
    rows = await reads.list_approvals(
        manager,
        session_id,
        owner=principal.owner_filter,
        status=status_,
        limit=limit,
        before=before,
    )
    return ApprovalList(approvals=[approval_public(row) for row in rows])


@router.post(
    "/{session_id}/approvals/{approval_id}",
    operation_id="respondApproval",
    response_model=ApprovalPublic,
    responses={
        200: REPLAY_HEADERS,
        **problems(
            notes={
                404: "No such session or approval",
                409: f"The approval is no longer pending, or a request with this Idempotency-Key "
                f"{IN_FLIGHT}",
                422: "Invalid request, or edited input (`updated_input`) this gateway or provider "
                f"does not take (the approval stays pending); or {REUSED}",
                503: STORAGE,
            }
        ),
    },
)
async def respond_approval(
    session_id: str,
    approval_id: str,
    body: ApprovalRespond,
    manager: Manager,
    principal: Authenticated,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Allow or deny a pending tool call (``allow_session`` also allows it for the session)."""
    command = Respond(
        session_id=session_id,
        approval_id=approval_id,
        decision=body.decision,
        message=body.message,
        updated_input=body.updated_input,
        idempotency_key=idempotency_key,
    )
    answered = await execute_once(manager, principal, command, render=approval_public)
    return answered.response()


@router.get("/{session_id}/questions", operation_id="listQuestions", responses=READ)
async def list_questions(
    session_id: str,
    manager: Manager,
    principal: Authenticated,
    status_: Annotated[QuestionStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[
        Timestamp | None, Query(description="Only questions asked before this time")
    ] = None,
) -> QuestionList:
    """The questions the agent asked in this session (``status=pending``: the open ones),
    newest first; page with ``before`` = the last ``created_at`` you got, until a page is
    empty (a page ends early where it would pass ``limits.max_page_bytes``)."""
    rows = await reads.list_questions(
        manager,
        session_id,
        owner=principal.owner_filter,
        status=status_,
        limit=limit,
        before=before,
    )
    return QuestionList(questions=[question_public(row) for row in rows])


@router.post(
    "/{session_id}/questions/{question_id}",
    operation_id="answerQuestion",
    response_model=QuestionPublic,
    responses={
        200: REPLAY_HEADERS,
        **problems(
            notes={
                404: "No such session or question",
                409: "The question is no longer pending (answered, expired or withdrawn), or a "
                f"request with this Idempotency-Key {IN_FLIGHT}",
                422: "Answers that do not fit the questions: not one per question, a label that "
                "was not offered, several labels for a single choice, text where only labels are "
                f"taken, or an empty answer (the question stays pending); or {REUSED}",
                503: STORAGE,
            }
        ),
    },
)
async def answer_question(
    session_id: str,
    question_id: str,
    body: QuestionReply,
    manager: Manager,
    principal: Authenticated,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Answer the agent's pending question: one answer per question, in the order asked."""
    answers = tuple(answer.answer() for answer in body.answers)
    command = Answer(
        session_id=session_id,
        question_id=question_id,
        answers=answers,
        idempotency_key=idempotency_key,
    )
    answered = await execute_once(manager, principal, command, render=question_public)
    return answered.response()


@router.post(
    "/{session_id}/interrupt",
    status_code=status.HTTP_202_ACCEPTED,
    operation_id="interruptTurn",
    responses=problems(notes={404: NO_SESSION, 409: "No turn is running", 503: STORAGE}),
)
async def interrupt(
    session_id: str, manager: Manager, principal: Authenticated
) -> InterruptAccepted:
    """Ask the agent to stop the running turn; it ends with ``turn.interrupted``."""
    turn_id = await manager.execute(Interrupt(session_id=session_id), issuer(principal))
    return InterruptAccepted(session_id=session_id, turn_id=turn_id)
