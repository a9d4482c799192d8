"""Creating a session: validate the request, choose its provider, store it whole.

A session is its row plus its first two events (``session.created``,
``session.provider.selected``); they are separate writes (the event log has its own writer), so
a write that fails after the row was stored takes the row back out: the request either created
the session with its events or left nothing behind. A session on a repository has its worktree
made last before it is stored (after everything that can refuse the request), and taken back
(worktree, then branch) with the row.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from app.errors import InvalidRequest
from app.events import (
    ApprovalMode,
    CandidateScore,
    EventData,
    RoutingStrategy,
    SessionCreated,
    SessionProviderSelected,
    SkippedProvider,
)
from app.process.gitrepo import Repository
from app.process.workspaces import resolve_workspace
from app.records import SessionRecord, json_dict, session_title
from app.runtime.choosing import Chooser
from app.runtime.coordinator import resolve_policy
from app.runtime.eventlog import EventLog
from app.runtime.failover import wants_failover
from app.runtime.history import WorkspaceHistory
from app.runtime.requests import SessionRequest
from app.runtime.selector import (
    CapabilitiesUnmet,
    Selection,
    check_approval_mode,
    model_unmet,
    resolve_strategy,
)
from app.runtime.worktrees import (
    BRANCH_PREFIX,
    Worktree,
    check_branch,
    check_repository,
    make_worktree,
    reserved_paths,
    take_back,
    worktree_columns,
)
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)


def metadata_bytes(metadata: object) -> int:
    """The size of a session's metadata as compact UTF-8 JSON (what is stored and listed)."""
    return len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())


def required_capabilities(request: SessionRequest) -> list[str]:
    """What the session's provider must be able to do: the request's ``requires``, and
    ``model_choice`` when it names a model (an agent that cannot choose one would run
    another; failover keeps to the same set)."""
    requires = list(request.requires)
    if request.model is not None and "model_choice" not in requires:
        requires.append("model_choice")
    return requires


async def create_session(
    request: SessionRequest,
    *,
    settings: Settings,
    chooser: Chooser,
    store: Storage,
    events: EventLog,
    clock: Callable[[], datetime],
    history: WorkspaceHistory | None = None,
) -> SessionRecord:
    """Validate everything, then store the session with its first events, or nothing."""
    if request.metadata is not None:
        size, limit = metadata_bytes(request.metadata), settings.limits.max_metadata_bytes
        if size > limit:
            raise InvalidRequest(
                f"metadata is {size} bytes as JSON; this gateway keeps at most {limit} per "
                "session (limits.max_metadata_bytes): store large data elsewhere and keep "
                "a reference to it",
                size=size,
                limit=limit,
            )
    mode = request.approval_mode or settings.sessions.default_approval_mode
    check_approval_mode(mode, settings.sessions.allowed_approval_modes)
    if request.retry is not None:  # an unknown strategy is refused now, not at the first turn
        resolve_policy(request.retry, None, settings.retry)
    session_id = "ses_" + secrets.token_hex(16)
    branch = request.branch or BRANCH_PREFIX + session_id
    planned: tuple[Repository, str] | None = None  # the repository, the commit
    workspace: Path | None = None
    if request.repository is not None:
        planned = await check_repository(request.repository, request.ref, settings)
        await check_branch(planned[0], branch)
    else:
        assert request.workspace is not None  # the API takes one or the other
        workspace = resolve_workspace(
            request.workspace, settings.workspaces.roots, reserved=reserved_paths(settings)
        )
    strategy = resolve_strategy(request.strategy, request.scenario, settings.selection)
    requires = required_capabilities(request)
    try:
        selection = await chooser.choose(
            request.provider, request.scenario, requires, strategy=strategy, approval_mode=mode
        )
    except CapabilitiesUnmet as unmet:
        if request.model is None:
            raise
        raise model_unmet(unmet, request.model, requires) from None
    worktree: Worktree | None = None
    if planned is not None:
        repository, commit = planned
        worktree = await make_worktree(
            settings, session_id=session_id, repository=repository, commit=commit, branch=branch
        )
        workspace = worktree.path
    assert workspace is not None
    try:
        if history is not None:  # a workspace too large to record is refused, not half-served
            await history.admit(workspace)
        return await _store(
            request,
            settings=settings,
            store=store,
            events=events,
            clock=clock,
            session_id=session_id,
            workspace=str(workspace),
            worktree=worktree,
            provider=selection.provider,
            mode=mode,
            selection=selection,
            strategy=strategy,
            requires=requires,
        )
    except BaseException:
        if worktree is not None:
            await take_back(worktree)
        raise


async def _store(
    request: SessionRequest,
    *,
    settings: Settings,
    store: Storage,
    events: EventLog,
    clock: Callable[[], datetime],
    session_id: str,
    workspace: str,
    worktree: Worktree | None,
    provider: str,
    mode: ApprovalMode,
    selection: Selection,
    strategy: RoutingStrategy,
    requires: list[str],
) -> SessionRecord:
    """Store the session's row, then its first events; the row is taken out again if they
    cannot be written."""
    chosen, reason = provider, selection.reason
    skipped = [SkippedProvider(provider=s.provider, reason=s.why) for s in selection.skipped]
    scores = [
        CandidateScore(provider=r.provider, score=r.score, turns=r.turns, exploring=r.exploring)
        for r in selection.ranking
    ]
    now = clock()
    row = SessionRecord(
        id=session_id,
        owner=request.owner,
        provider=chosen,
        workspace=workspace,
        **worktree_columns(worktree),
        model=request.model or settings.providers[chosen].model,
        approval_mode=mode,
        status="idle",
        retry=request.retry,
        metadata=request.metadata,
        title=session_title((request.metadata or {}).get("title")),
        budget=request.budget,
        selection={
            "reason": reason,
            "skipped": [json_dict(p) for p in skipped],
            "strategy": strategy,
            "scores": [json_dict(score) for score in scores],
            # What failover selects again with (app/runtime/failover.py).
            "fallback": wants_failover(request, settings),
            "scenario": request.scenario,
            "requires": list(requires),
        },
        last_seq=0,
        created_at=now,
        updated_at=now,
    )
    first: list[EventData] = [
        SessionCreated(
            provider=chosen,
            workspace=row.workspace,
            model=row.model,
            approval_mode=mode,
            repository=row.repository,
            branch=row.branch,
            base=row.base,
        ),
        SessionProviderSelected(
            provider=chosen, reason=reason, skipped=skipped, strategy=strategy, scores=scores
        ),
    ]
    encoded = [event.model_dump_json() for event in first]  # fails before anything is stored
    await store.create_session(row)
    try:
        for event, data_json in zip(first, encoded, strict=True):
            await events.append(row.id, event, provider=chosen, data_json=data_json)
    except Exception:
        log.warning("session %s could not be stored whole; nothing of it is kept", row.id)
        await store.discard_session(row.id)
        raise
    log.info(
        "session %s created on %s (%s)",
        row.id,
        chosen,
        reason,
        extra={"session_id": row.id, "provider": chosen, "reason": reason},
    )
    stored = await store.get_session(row.id)
    assert stored is not None
    return stored
