"""Forking a session: a new session with the parent's files and conversation up to a turn.

    POST /v1/sessions/{id}/fork {at_turn?}          (LocalSessions holds the parent idle)
      └► at_turn: a completed turn of the parent (404 unknown, 422 not completed);
         default its last completed turn
      └► the workspace (app/runtime/forkspace.py): a new worktree or copy with the files as
         they were after at_turn
      └► the conversation:
           native   the provider's own fork of the parent's thread (``Provider.fork_thread``),
                    when it has the ``fork`` capability and the thread holds exactly the
                    session's turns (one thread, each turn up to at_turn completed at its
                    first attempt on this provider): a thread made now, or one its CLI makes
                    on the fork's first run (``fork_start``)
           handoff  otherwise: the turns up to at_turn, told before the fork's first prompt
                    (app/runtime/handoff.py), on a fresh thread
      └► the new session stored whole: its row, ``session.created``,
         ``session.provider_selected``, ``session.forked`` (and ``session.thread_bound`` for a
         thread made now); then ``session.forked`` on the parent

Whatever fails on the way takes back what was made before it, newest first: the parent's
event, the new session's row and events (its binding with it), the thread, the workspace.
The new session has the parent's owner, provider, model, approval mode, retry policy,
selection settings and a copy of its metadata.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from app.errors import NotFound, TurnNotForkable
from app.events import (
    EventData,
    ForkConversation,
    HandoffSize,
    SessionCreated,
    SessionForked,
    SessionProviderSelected,
    SessionThreadBound,
)
from app.providers.base import ForkedThread, ForkFailed, ForkRequest, Provider, SessionSpec
from app.providers.sandboxing import forget_homes
from app.records import SessionRecord, TurnRecord
from app.runtime.eventlog import EventLog
from app.runtime.failover import HANDOFF_EVENTS, HANDOFF_PAGE, NO_SEQ_YET
from app.runtime.forkspace import ForkWorkspace, make_fork_workspace, take_back_fork_workspace
from app.runtime.handoff import HANDOFF_TYPES, build_fork_handoff
from app.runtime.history import WorkspaceHistory
from app.runtime.turns import FORK_TURNS
from app.runtime.worktrees import worktree_columns
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

_REBINDS = 1_000
"""More thread bindings than this in one session: its thread is not forked natively."""


@dataclass(frozen=True, kw_only=True)
class ForkServices:
    """What a fork uses (``LocalSessions`` has each)."""

    settings: Settings
    store: Storage
    events: EventLog
    providers: Mapping[str, Provider]
    clock: Callable[[], datetime]
    history: WorkspaceHistory


@dataclass(frozen=True, kw_only=True)
class _Conversation:
    """How the fork carries the conversation, and what its row keeps of it."""

    kind: ForkConversation
    thread_id: str | None = None
    """A thread made now (native), bound to the new session."""
    fork_start: dict[str, JsonValue] | None = None
    handoff: HandoffSize | None = None


async def turn_to_fork(store: Storage, parent: SessionRecord, at_turn: str | None) -> TurnRecord:
    """The parent's turn ``at_turn`` (404 unknown, 422 not completed), or its last completed
    turn (422 when it has none)."""
    if at_turn is not None:
        turn = await store.get_turn(parent.id, at_turn)
        if turn is None:
            raise NotFound(f"turn {at_turn} does not exist in session {parent.id}")
        if turn.status != "completed":
            raise TurnNotForkable(
                f"turn {at_turn} is {turn.status}; a session is forked at a completed turn",
                turn_id=at_turn,
                turn_status=turn.status,
            )
        return turn
    before: int | None = None
    while True:
        page = await store.list_turns(parent.id, limit=100, before=before)
        for turn in page:
            if turn.status == "completed":
                return turn
        if len(page) < 100:
            raise TurnNotForkable(
                f"session {parent.id} has no completed turn to fork at", turn_id=None
            )
        before = page[-1].number


async def fork_session(
    parent: SessionRecord, turn: TurnRecord, *, services: ForkServices
) -> SessionRecord:
    """Make the fork of ``parent`` at its completed ``turn``, or nothing (module docstring)."""
    child_id = "ses_" + secrets.token_hex(16)
    newest = await services.store.list_turns(parent.id, limit=1)
    workspace = await make_fork_workspace(
        services.settings,
        parent,
        child_id=child_id,
        at_turn=turn,
        latest=bool(newest) and newest[0].id == turn.id,
        history=services.history,
    )
    child_spec = SessionSpec(
        session_id=child_id,
        workspace=workspace.path,
        model=parent.model,
        approval_mode=parent.approval_mode,  # type: ignore[arg-type]
        git_dir=None if parent.git_dir is None else Path(parent.git_dir),
    )
    provider = services.providers.get(parent.provider)
    conversation: _Conversation | None = None
    stored = False
    try:
        conversation = await _conversation(services, provider, parent, turn, child_spec)
        child = await _store_fork(services, parent, turn, workspace, child_id, conversation)
        stored = True
        await services.events.append(
            parent.id, _forked(parent, child_id, turn, conversation), provider=parent.provider
        )
    except BaseException:
        log.warning("session %s could not be forked; nothing of the fork is kept", parent.id)
        if stored:
            await services.store.discard_session(child_id)
        if conversation is not None and conversation.thread_id and provider is not None:
            await _discard_thread(provider, child_spec, conversation.thread_id)
        # What a native fork put in the new session's own CLI home (its sandbox's).
        await asyncio.to_thread(forget_homes, services.settings, [child_id])
        await take_back_fork_workspace(workspace)
        raise
    assert conversation is not None
    log.info(
        "session %s forked at turn %d as %s (%s)",
        parent.id,
        turn.number,
        child_id,
        conversation.kind,
        extra={"session_id": child_id, "forked_from": parent.id, "turn_id": turn.id},
    )
    return child


async def _discard_thread(provider: Provider, spec: SessionSpec, thread_id: str) -> None:
    try:
        await provider.discard_thread(spec, thread_id)
    except Exception:
        log.exception("the thread %s made for a fork that failed was not discarded", thread_id)


def _forked(
    parent: SessionRecord, child_id: str, turn: TurnRecord, conversation: _Conversation
) -> SessionForked:
    return SessionForked(
        parent_id=parent.id,
        child_id=child_id,
        at_turn=turn.id,
        turn_number=turn.number,
        conversation=conversation.kind,
        handoff=conversation.handoff,
    )


# --- the conversation ------------------------------------------------------------------------


async def _conversation(
    services: ForkServices,
    provider: Provider | None,
    parent: SessionRecord,
    turn: TurnRecord,
    child: SessionSpec,
) -> _Conversation:
    """The provider's own fork of the parent's thread when it can make one, else a
    hand-off."""
    if provider is not None and provider.capabilities.fork:
        request = await native_request(services.store, parent, turn, child)
        forked: ForkedThread | None = None
        if request is not None:
            try:
                forked = await provider.fork_thread(request)
            except ForkFailed as exc:
                log.warning(
                    "session %s: %s could not fork thread %s (%s); the fork gets a hand-off",
                    parent.id,
                    parent.provider,
                    request.parent.thread_id,
                    exc,
                )
        if forked is not None:
            start: dict[str, JsonValue] = {FORK_TURNS: request.keep_turns if request else 0}
            if forked.pending is not None:
                start |= {"thread": forked.pending.thread_id, "at": forked.pending.at}
            return _Conversation(kind="native", thread_id=forked.thread_id, fork_start=start)
    handoff = await _handoff(services, parent, turn)
    if not handoff.prompt:
        return _Conversation(kind="handoff", handoff=HandoffSize(turns=0, chars=0))
    return _Conversation(
        kind="handoff",
        fork_start={"handoff": handoff.prompt},
        handoff=HandoffSize(turns=handoff.turns, chars=handoff.chars),
    )


async def native_request(
    store: Storage, parent: SessionRecord, turn: TurnRecord, child: SessionSpec
) -> ForkRequest | None:
    """What to ask the provider for a native fork at ``turn``, or None when the parent's
    thread does not hold exactly the session's turns up to it: no thread, a thread bound
    more than once (failover, a lost thread), or a turn up to ``turn`` that did not complete
    at its first attempt on the session's provider (retries add messages to the thread)."""
    binding = await store.get_binding(parent.id, parent.provider)
    if binding is None:
        return None
    bound = await store.events_before(
        parent.id, before=NO_SEQ_YET, types=("session.thread_bound",), limit=_REBINDS
    )
    threads = {json.loads(event.json)["data"].get("thread_id") for event in bound}
    if len(bound) >= _REBINDS or threads - {binding.thread_id}:
        return None
    kept = await store.list_turns(parent.id, limit=turn.number, before=turn.number + 1)
    if len(kept) != turn.number or any(
        t.status != "completed" or t.attempts != 1 or t.provider != parent.provider for t in kept
    ):
        return None
    newest = await store.list_turns(parent.id, limit=1)
    last = newest[0].number if newest else turn.number
    offset = (parent.fork_start or {}).get(FORK_TURNS)
    earlier = offset if isinstance(offset, int) else 0
    spec = SessionSpec(
        session_id=parent.id,
        workspace=Path(parent.workspace),
        model=parent.model,
        approval_mode=parent.approval_mode,  # type: ignore[arg-type]
        thread_id=binding.thread_id,
        thread_bound_at=binding.created_at,
        git_dir=None if parent.git_dir is None else Path(parent.git_dir),
    )
    return ForkRequest(
        parent=spec,
        child=child,
        keep_turns=earlier + turn.number,
        turns=earlier + last,
    )


async def _handoff(services: ForkServices, parent: SessionRecord, turn: TurnRecord) -> Any:
    """The hand-off of the parent's turns up to ``turn``, from its log read backwards from
    that turn's end."""
    await services.events.flush()
    newest_first: list[dict[str, Any]] = []
    before, reached = NO_SEQ_YET, False
    while len(newest_first) < HANDOFF_EVENTS:
        page = await services.store.events_before(
            parent.id, before=before, types=HANDOFF_TYPES, limit=HANDOFF_PAGE
        )
        for event in page:
            if not reached:
                reached = event.turn_id == turn.id and event.type == "turn.completed"
                if not reached:
                    continue
            newest_first.append(json.loads(event.json))
        if len(page) < HANDOFF_PAGE:
            break
        before = page[-1].seq
    return build_fork_handoff(
        reversed(newest_first),
        from_provider=parent.provider,
        max_chars=services.settings.sessions.handoff_max_chars,
        earlier=turn.number,
        mask=services.events.mask.text,
    )


# --- storing the fork ------------------------------------------------------------------------


async def _store_fork(
    services: ForkServices,
    parent: SessionRecord,
    turn: TurnRecord,
    workspace: ForkWorkspace,
    child_id: str,
    conversation: _Conversation,
) -> SessionRecord:
    """Store the fork's row, its binding (a thread made now) and its first events; the row
    (and with it the rest) is taken out again if they cannot all be written."""
    now = services.clock()
    row = replace(
        parent,
        id=child_id,
        workspace=str(workspace.path),
        **worktree_columns(workspace.worktree),
        status="idle",
        metadata=None if parent.metadata is None else dict(parent.metadata),
        last_seq=0,
        created_at=now,
        updated_at=now,
        closed_at=None,
        forked_from=parent.id,
        forked_at=turn.id,
        fork_start=conversation.fork_start,
    )
    selection = parent.selection or {}
    first: list[EventData] = [
        SessionCreated(
            provider=row.provider,
            workspace=row.workspace,
            model=row.model,
            approval_mode=row.approval_mode,
            repository=row.repository,
            branch=row.branch,
            base=row.base,
        ),
        SessionProviderSelected.model_validate(
            {
                "provider": row.provider,
                "reason": selection.get("reason", "explicit"),
                "strategy": selection.get("strategy", "ordered"),
            }
        ),
        _forked(parent, child_id, turn, conversation),
    ]
    if conversation.thread_id is not None:
        first.append(SessionThreadBound(thread_id=conversation.thread_id))
    encoded = [event.model_dump_json() for event in first]  # fails before anything is stored
    await services.store.create_session(row)
    try:
        if conversation.thread_id is not None:
            await services.store.touch_binding(
                session_id=child_id,
                provider=row.provider,
                thread_id=conversation.thread_id,
                now=now,
            )
        for event, data_json in zip(first, encoded, strict=True):
            await services.events.append(
                child_id, event, provider=row.provider, data_json=data_json
            )
    except BaseException:
        await services.store.discard_session(child_id)
        raise
    stored = await services.store.get_session(child_id)
    assert stored is not None
    return stored
