"""Changing a session's model, approval mode or provider between its turns.

    Configure {model?, approval_mode?, provider?}       (LocalSessions holds the session idle)
      └► what changes: a value equal to the session's is no change; a new provider without a
         model brings the model it is configured with (``providers.<name>.model``)
      └► validated as a new session's are (app/runtime/creation.py), before anything is
         written:
           approval mode  enabled on this gateway (422), not refused by the provider as
                          configured (422 ``approval_mode_refused``)
           model          only on a provider with ``model_choice`` (422 ``capabilities_unmet``)
           provider       only before the session's first turn and thread (409
                          ``provider_fixed``); then chosen as an explicit provider is: known
                          (422), enabled and available (503), with the capabilities the
                          session requires (422)
      └► the session's idle live side released (its CLI closed)
      └► the row updated, then ``session.configured`` with the values now; the row is put
         back when the event cannot be stored

The next turn opens the provider's session with the new values, resuming the thread from its
binding (on a new provider there is none yet: a fresh one). Nothing changes, nothing is
written: the session is answered as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from pydantic import JsonValue

from app.errors import InvalidRequest, ProviderFixed
from app.events import ApprovalMode, CandidateScore, SessionConfigured, SkippedProvider
from app.records import SessionRecord, json_dict
from app.runtime.choosing import Chooser
from app.runtime.commands import Configure
from app.runtime.eventlog import EventLog
from app.runtime.selector import (
    Candidate,
    CapabilitiesUnmet,
    ProviderState,
    Selection,
    check_approval_mode,
    model_unmet,
    select,
)
from app.store.interface import Storage

log = logging.getLogger(__name__)

MODEL_CHOICE = "model_choice"


@dataclass(frozen=True, kw_only=True)
class Configuration:
    """A session's model, approval mode, provider and selection after a configure."""

    model: str | None
    approval_mode: ApprovalMode
    provider: str
    selection: dict[str, JsonValue] | None


async def configure(
    row: SessionRecord,
    command: Configure,
    *,
    by: str,
    chooser: Chooser,
    store: Storage,
    events: EventLog,
    clock: Callable[[], datetime],
    release: Callable[[], Awaitable[None]],
) -> SessionRecord:
    """Change idle ``row`` as ``command`` asks (the module docstring); ``release`` drops its
    live side once the change is validated. The session as it is now."""
    change = await configuration(row, command, chooser=chooser, store=store)
    if change is None:
        return row
    await release()
    return await _store(row, change, by=by, store=store, events=events, clock=clock)


async def configuration(
    row: SessionRecord,
    command: Configure,
    *,
    chooser: Chooser,
    store: Storage,
) -> Configuration | None:
    """What ``row`` becomes, validated (with ``chooser``'s settings and providers); None when
    nothing changes."""
    settings = chooser.settings
    if command.model is None and command.approval_mode is None and command.provider is None:
        raise InvalidRequest(
            "nothing to change: give model, approval_mode or provider (each left out stays "
            "as it is)"
        )
    current = cast(ApprovalMode, row.approval_mode)
    mode = command.approval_mode or current
    provider = command.provider or row.provider
    moved = provider != row.provider
    named = command.model is not None and (moved or command.model != row.model)
    if moved:
        await _check_provider_free(row, provider, store)
    if mode != current:
        check_approval_mode(mode, settings.sessions.allowed_approval_modes)
    selection = dict(row.selection or {})
    stored = selection.get("requires")
    requires = [str(name) for name in stored] if isinstance(stored, list) else []
    if named and MODEL_CHOICE not in requires:
        requires.append(MODEL_CHOICE)  # as at creation: failover keeps to it too
        selection["requires"] = list(requires)
    try:
        if moved:
            chosen = await chooser.choose(provider, None, requires, approval_mode=mode)
            selection |= _selected(chosen)
        elif named or mode != current:
            needs = [MODEL_CHOICE] if named else []
            _check_current(row.provider, chooser, needs, mode if mode != current else None)
    except CapabilitiesUnmet as unmet:
        if command.model is None:
            raise
        raise model_unmet(unmet, command.model, requires) from None
    model = command.model
    if model is None:
        model = settings.providers[provider].model if moved else row.model
    change = Configuration(
        model=model,
        approval_mode=mode,
        provider=provider,
        selection=selection if selection != (row.selection or {}) else row.selection,
    )
    unchanged = Configuration(
        model=row.model, approval_mode=current, provider=row.provider, selection=row.selection
    )
    return None if change == unchanged else change


async def _check_provider_free(row: SessionRecord, provider: str, store: Storage) -> None:
    """409 ``provider_fixed`` once the session's conversation lives in its provider's thread:
    after its first turn, or a fork's that holds a thread of its own already."""
    turns = await store.list_turns(row.id, limit=1)
    thread = await store.get_binding(row.id, row.provider)
    pending = (row.fork_start or {}).get("thread")
    if not turns and thread is None and pending is None:
        return
    why = "has run a turn" if turns else "holds a thread of its own (a fork)"
    raise ProviderFixed(
        f"session {row.id} {why} on {row.provider}: its conversation lives in that agent's "
        f"thread, so its provider is fixed; create a new session (or fork this one) to run "
        f"on {provider}",
        provider=row.provider,
    )


def _check_current(
    provider: str, chooser: Chooser, requires: list[str], mode: ApprovalMode | None
) -> None:
    """Refuse what the session's own provider cannot do, as the selector refuses a candidate
    (its health is not asked: it serves the session already)."""
    built = chooser.providers.get(provider)
    configured = chooser.settings.providers.get(provider)
    state = ProviderState(
        enabled=configured is not None and configured.enabled,
        available=True,
        capabilities=built.capabilities if built else None,
        refuses=built.refuses(mode) if built and mode else None,
    )
    select([Candidate(provider=provider, reason="explicit")], {provider: state}, requires=requires)


def _selected(chosen: Selection) -> dict[str, JsonValue]:
    """What the session's ``selection`` says of a provider a client named."""
    skipped = [SkippedProvider(provider=s.provider, reason=s.why) for s in chosen.skipped]
    scores = [
        CandidateScore(provider=r.provider, score=r.score, turns=r.turns, exploring=r.exploring)
        for r in chosen.ranking
    ]
    return {
        "reason": chosen.reason,
        "skipped": [json_dict(p) for p in skipped],
        "scores": [json_dict(score) for score in scores],
    }


async def _store(
    row: SessionRecord,
    change: Configuration,
    *,
    by: str,
    store: Storage,
    events: EventLog,
    clock: Callable[[], datetime],
) -> SessionRecord:
    """Update the row, then tell ``session.configured``; the row is put back when the event
    cannot be stored."""
    event = SessionConfigured(
        model=change.model, approval_mode=change.approval_mode, provider=change.provider, by=by
    )
    encoded = event.model_dump_json()  # fails before anything is stored
    await store.update_session(
        row.id,
        model=change.model,
        approval_mode=change.approval_mode,
        provider=change.provider,
        selection=change.selection,
        updated_at=clock(),
    )
    try:
        await events.append(row.id, event, provider=change.provider, data_json=encoded)
    except Exception:
        log.warning("session %s: its configure could not be told; the row is put back", row.id)
        try:
            await store.update_session(
                row.id,
                model=row.model,
                approval_mode=row.approval_mode,
                provider=row.provider,
                selection=row.selection,
                updated_at=row.updated_at,
            )
        except Exception:
            log.exception("session %s: its row could not be put back after a configure", row.id)
        raise
    log.info(
        "session %s configured: provider %s, model %s, approval mode %s",
        row.id,
        change.provider,
        change.model,
        change.approval_mode,
        extra={"session_id": row.id, "provider": change.provider, "by": by},
    )
    stored = await store.get_session(row.id)
    assert stored is not None
    return stored
