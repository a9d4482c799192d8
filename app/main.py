"""The application factory: ``create_app(settings)`` builds everything from its settings."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from app import __version__
from app.api import events, health, problems, runs, sessions
from app.api import providers as providers_api
from app.api.security import GateMiddleware, load_or_create_token
from app.providers.factory import build_providers
from app.providers.registry import ProviderRegistry
from app.runtime.eventlog import EventLog
from app.runtime.process import ProcessRunner
from app.runtime.sessions import SessionManager
from app.settings import Settings
from app.store.db import check_schema, create_engine
from app.store.repository import Store
from app.store.retention import cleanup

log = logging.getLogger(__name__)

MAINTENANCE_PERIOD_S = 30.0


def create_app(
    settings: Settings,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> FastAPI:
    """The gateway as an ASGI app; start-up fails on an unknown schema."""
    configured = settings.server.token.get_secret_value() if settings.server.token else None
    token, _ = load_or_create_token(configured, settings.storage.data_dir)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_engine(settings.storage.database_url)
        runner = ProcessRunner()
        try:
            await check_schema(engine)
            store = Store(engine)
            providers = build_providers(settings, runner)
            registry = ProviderRegistry(
                settings=settings,
                providers=providers,
                runner=runner,
                ttl_s=settings.selection.probe_ttl_s,
                clock=clock,
            )
            event_log = EventLog(
                store, queue_size=settings.server.subscriber_queue_size, clock=clock
            )
            manager = SessionManager(
                settings=settings,
                store=store,
                events=event_log,
                providers=providers,
                registry=registry,
                clock=clock,
            )
            await manager.recover()
            app.state.store = store
            app.state.providers = providers
            app.state.registry = registry
            app.state.manager = manager
            tasks = [
                asyncio.create_task(_maintain(manager, _period(settings)), name="maintenance"),
                asyncio.create_task(_retention(settings, store, clock), name="retention"),
            ]
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await manager.aclose()
                for provider in providers.values():
                    await provider.aclose()
        finally:
            await runner.aclose()
            await engine.dispose()

    app = FastAPI(
        title="Agent Gateway",
        version=__version__,
        summary="One HTTP, SSE and WebSocket API in front of the coding-agent CLIs.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.token = token
    problems.install(app)
    app.include_router(health.router)
    app.include_router(providers_api.router)
    app.include_router(sessions.router)
    app.include_router(events.router)
    app.include_router(runs.router)
    if settings.server.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server.allowed_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
        )
    app.add_middleware(
        GateMiddleware,
        allowed_hosts=settings.server.allowed_hosts,
        allowed_origins=settings.server.allowed_origins,
        max_body_bytes=settings.server.max_body_bytes,
    )
    return app


def _period(settings: Settings) -> float:
    idle = min((p.idle_timeout_s for p in settings.providers.values()), default=600.0)
    return min(MAINTENANCE_PERIOD_S, idle / 4)


async def _maintain(manager: SessionManager, period_s: float) -> None:
    """Close idle CLI processes; a failure is logged and the loop goes on."""
    while True:
        await asyncio.sleep(period_s)
        try:
            await manager.suspend_idle()
        except Exception:
            log.exception("idle-process maintenance failed")


async def _retention(settings: Settings, store: Store, clock: Callable[[], datetime]) -> None:
    """Delete bindings unused for ``retention_days`` (and their ended sessions' events)."""
    while True:
        try:
            report = await cleanup(
                store.engine, retention_days=settings.storage.retention_days, now=clock()
            )
            if report.bindings_deleted:
                log.info("retention removed %d bindings", report.bindings_deleted)
        except Exception:
            log.exception("retention cleanup failed")
        await asyncio.sleep(settings.storage.cleanup_interval_s)
