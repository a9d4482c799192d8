"""The gateway's background loops: idle CLI processes closed, the admin token file
watched, retention applied (started by app/main.py with the app)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from app.api.security import TokenFile
from app.providers.sandboxing import forget_homes
from app.runtime.history import WorkspaceHistory
from app.runtime.sessions import Sessions
from app.runtime.worktrees import forget_worktrees
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

TOKEN_CHECK_S = 1.0
"""How often the admin token file is looked at between requests (a rotation then ends the
streams opened with the old token, and the new token joins the mask)."""


async def maintain(manager: Sessions, period_s: float) -> None:
    """Close idle CLI processes; a failure is logged and the loop goes on."""
    while True:
        await asyncio.sleep(period_s)
        try:
            await manager.suspend_idle()
        except Exception:
            log.exception("idle-process maintenance failed")


async def watch_token(token_file: TokenFile | None) -> None:
    """Look at the admin token file now and then: a rotation takes effect even while no
    request comes (streams opened with the old token end; the new one is masked)."""
    if token_file is None:
        return
    while True:
        await asyncio.sleep(TOKEN_CHECK_S)
        try:
            token_file.check()
        except Exception:
            log.exception("could not look at the admin token file")


async def retention(
    settings: Settings,
    store: Storage,
    clock: Callable[[], datetime],
    history: WorkspaceHistory,
) -> None:
    """Delete bindings unused for ``retention_days`` (and their ended sessions' events, CLI
    homes and workspace records)."""
    while True:
        try:
            report = await store.retain(
                retention_days=settings.storage.retention_days,
                now=clock(),
                max_events_per_session=settings.storage.max_events_per_session,
            )
            if report.bindings_deleted:
                log.info("retention removed %d bindings", report.bindings_deleted)
            if homes := await asyncio.to_thread(forget_homes, settings, report.forgotten):
                log.info("retention removed %d sessions' CLI homes", homes)
            if worktrees := await forget_worktrees(settings, store, report.forgotten):
                log.info("retention removed %d sessions' worktrees (branches kept)", worktrees)
            forgotten = list(report.forgotten)
            if records := await asyncio.to_thread(history.forget, forgotten):
                log.info("retention removed %d sessions' workspace records", records)
            if report.events_pruned:
                log.info(
                    "retention pruned %d events past storage.max_events_per_session",
                    report.events_pruned,
                )
        except Exception:
            log.exception("retention cleanup failed")
        await asyncio.sleep(settings.storage.cleanup_interval_s)
