"""REST routes for what a session's turns changed in its workspace, and for putting it back
(thin: the runtime reads the recorded states, app/runtime/changes.py, and a revert is a
command, app/runtime/commands.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field, StringConstraints

from app.api.contract import problems
from app.api.deps import Manager, issuer
from app.api.schemas import _In
from app.api.security import Authenticated
from app.api.sessions import STORAGE
from app.events import ChangedFile
from app.records import RevertRecord
from app.runtime import changes as recorded
from app.runtime.commands import Revert

PATCH_MEDIA_TYPE = "text/x-diff"
NOT_RECORDED = (
    "The state asked for was not recorded (`snapshot_unavailable`: snapshots off, the "
    "workspace over their cap then, no turn yet, or the `to` turn still running)"
)

router = APIRouter(prefix="/v1/sessions", tags=["changes"])

StateName = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class ChangesPublic(BaseModel):
    """The files that differ between two states of the workspace, and their unified diff."""

    session_id: str
    from_: str = Field(serialization_alias="from")
    """``start`` or the turn id asked for (the state at that turn's start)."""
    to: str
    """``now`` or the turn id asked for (the state at that turn's end)."""
    files: list[ChangedFile]
    additions: int
    deletions: int
    diff: str
    """The unified diff (binary files named, not carried: ``?format=patch`` carries them)."""
    diff_truncated: bool = False
    """The diff was cut at ``limits.max_page_bytes``; ``?format=patch`` has all of it."""


class RevertCreate(_In):
    to_turn: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    """The turn whose start the workspace's files go back to."""


class RevertPublic(BaseModel):
    session_id: str
    to_turn: str
    turn_number: int
    files: list[ChangedFile]
    """What the revert changed, from the workspace as it was to that turn's start."""
    additions: int
    deletions: int


@router.get(
    "/{session_id}/changes",
    operation_id="getChanges",
    responses={
        200: {
            "description": "The changed files and their diff (JSON), or with `format=patch` "
            "the patch `git apply` takes on the `from` state",
            "content": {PATCH_MEDIA_TYPE: {"schema": {"type": "string"}}},
        },
        **problems(
            notes={
                404: "No such session (or not yours), or no such turn in it (`from`, `to`)",
                409: NOT_RECORDED,
                422: "`from` after `to`, an unknown parameter, or the workspace now over the "
                "snapshot cap (`workspace_too_large`, for `to=now`)",
                503: STORAGE,
            }
        ),
    },
    response_model=ChangesPublic,
)
async def get_changes(
    session_id: str,
    manager: Manager,
    principal: Authenticated,
    from_: Annotated[
        StateName,
        Query(alias="from", description="`start`, or a turn id: the state at its start"),
    ] = recorded.START,
    to: Annotated[
        StateName, Query(description="`now`, or a turn id: the state at its end")
    ] = "now",
    format: Annotated[
        Literal["json", "patch"],
        Query(description="`patch`: `text/x-diff` with binary files, for `git apply`"),
    ] = "json",
) -> Response:
    """What changed in the workspace from one recorded state to another: by default from the
    first turn's start to now; ``from=T&to=T`` is what turn T changed."""
    span = await recorded.span(
        manager, session_id, owner=principal.owner_filter, from_=from_, to=to
    )
    if format == "patch":
        body = await recorded.patch(manager, span, binary=True)
        return Response(body, media_type=PATCH_MEDIA_TYPE)
    found = await recorded.changes(manager, span)
    diff = await recorded.patch(manager, span, binary=False)
    limit = manager.settings.limits.max_page_bytes
    public = ChangesPublic(
        session_id=session_id,
        from_=from_,
        to=to,
        files=[ChangedFile(**vars(change)) for change in found.files],
        additions=found.additions,
        deletions=found.deletions,
        diff=diff[:limit].decode("utf-8", errors="replace"),
        diff_truncated=len(diff) > limit,
    )
    return Response(public.model_dump_json(by_alias=True), media_type="application/json")


@router.post(
    "/{session_id}/revert",
    operation_id="revertSession",
    responses=problems(
        notes={
            404: "No such session (or not yours), or no such turn in it (`to_turn`)",
            409: "A turn is running (`turn_id` names it), a revert is already running, the "
            "session is closed, or the turn's start was not recorded (`snapshot_unavailable`)",
            422: "The workspace now over the snapshot cap (`workspace_too_large`)",
            503: STORAGE,
        }
    ),
)
async def revert(
    session_id: str, body: RevertCreate, manager: Manager, principal: Authenticated
) -> RevertPublic:
    """Put the workspace's files back as they were when turn ``to_turn`` started: changed
    files rewritten, files added since removed, ignored files left alone. Told as a
    ``session.reverted`` event, and to the agent at the start of its next prompt."""
    done = await manager.execute(
        Revert(session_id=session_id, to_turn=body.to_turn), issuer(principal)
    )
    return revert_public(done)


def revert_public(done: RevertRecord) -> RevertPublic:
    return RevertPublic(
        session_id=done.session_id,
        to_turn=done.to_turn,
        turn_number=done.turn_number,
        files=[ChangedFile.model_validate(file) for file in done.files],
        additions=done.additions,
        deletions=done.deletions,
    )
