"""The application factory: ``create_app(settings)`` builds everything from its settings."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from app import __version__, background
from app.api import (
    acpsocket,
    changes,
    console,
    events,
    health,
    metrics,
    problems,
    runs,
    sessions,
    usage,
    webhooks,
)
from app.api import providers as providers_api
from app.api.gate import GateMiddleware
from app.api.problemmask import ProblemMaskMiddleware
from app.api.security import (
    ADMIN,
    TokenFile,
    install_access_control,
    load_or_create_token,
    token_path,
)
from app.budget_settings import budget_keys_refusal
from app.cluster.redis import connect
from app.observability.looplag import watch_loop_lag
from app.observability.metrics import GatewayMetrics
from app.observability.observer import EventObserver
from app.observability.storespans import traced_storage
from app.observability.telemetry import Telemetry, start_telemetry
from app.observability.tracing import OFF, Tracer
from app.observability.webhookmetrics import WebhookMetrics
from app.process.snapshots import git_problem
from app.process.watchdog import supervised_runner
from app.providers.base import Provider
from app.providers.catalog import cli_secrets, resolve
from app.providers.factory import build_providers
from app.providers.registry import ProviderRegistry
from app.redaction import SecretMask, secrets_of
from app.runtime.cluster import Cluster
from app.runtime.clustered import ClusteredSessions
from app.runtime.eventlog import EventLog
from app.runtime.idempotency import forget_unanswered
from app.runtime.local import LocalSessions
from app.runtime.sessions import Sessions
from app.runtime.shares import stream_cap
from app.settings import ConfigError, Settings
from app.store.db import checkpoint, create_engine
from app.store.interface import Storage
from app.store.repository import Store
from app.store.schema import check_schema
from app.store.webhookstore import WebhookStore
from app.webhooks.service import Webhooks

log = logging.getLogger(__name__)

MAINTENANCE_PERIOD_S = 30.0
SHUTDOWN_RETRY_MS = 5000
"""The ``retry:`` hint of the SSE ``shutdown`` frame: when a client should reconnect."""
TURNS_FIRST_S = 1.0
"""At shutdown, how long streams wait for running turns to record their end before they
are closed (so clients usually see ``turn.interrupted`` live); the turns keep the rest of
``server.shutdown_grace_s``."""


def begin_shutdown(app: FastAPI) -> None:
    """Start the graceful stop now (the server calls it when SIGTERM/SIGINT arrives).

    Running turns end as interrupted (``gateway_shutdown``), then every SSE stream gets a
    ``shutdown`` frame and every WebSocket a 1012 close, so no open stream holds the server.
    Idempotent; a no-op before start-up completed.
    """
    begin: Callable[[], object] | None = getattr(app.state, "begin_shutdown", None)
    if begin is not None:
        begin()


def _cluster(
    redis: Redis, settings: Settings, store: Storage, metrics: GatewayMetrics, tracer: Tracer
) -> Cluster:
    """This replica's part in the cluster; refused commands are counted by reason."""
    refusals = metrics.cluster_refused
    return Cluster(
        redis,
        settings.cluster,
        store,
        refused=lambda reason: refusals.labels(reason=reason).inc(),
        metrics=metrics,
        tracer=tracer,
    )


def _stores(
    engine: AsyncEngine,
    redis: Redis | None,
    settings: Settings,
    metrics: GatewayMetrics,
    tracer: Tracer,
) -> tuple[Store, Storage, Cluster | None]:
    """The store (with replicas every write a session's owner makes is fenced by its claim),
    the same store as the runtime sees it (its calls spans inside a trace, with tracing on),
    and this replica's part in the cluster."""
    store = Store(engine, holder=None if redis is None else settings.cluster.replica_id)
    system = "sqlite" if settings.storage.database_url.startswith("sqlite") else "postgresql"
    traced = traced_storage(store, tracer, system=system)
    cluster = None if redis is None else _cluster(redis, settings, traced, metrics, tracer)
    return store, traced, cluster


def _redis(settings: Settings) -> Redis | None:
    """The one Redis client (it connects on first use) of the limits and the cluster, named
    after this replica in ``CLIENT LIST``; None on a single gateway."""
    url, replica = settings.cluster.redis_url, settings.cluster.replica_id
    return None if url is None else connect(url, name=f"agw:{replica}:main")


def create_app(
    settings: Settings,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    mask: SecretMask | None = None,
) -> FastAPI:
    """The gateway as an ASGI app; start-up fails on an unknown schema.

    ``mask``: the secret mask to share (the log's redactor holds it too); the gateway adds
    its keys, the providers' credentials and every admin token it reads to it."""
    settings = resolve(settings)
    configured = settings.server.token.get_secret_value() if settings.server.token else None
    token, _ = load_or_create_token(configured, settings.storage.data_dir)
    mask, token_file = _secrets(settings, token, mask, from_file=not configured)
    telemetry = start_telemetry(settings, mask)
    # Several replicas: the one Redis client (it connects on first use) of the limits and
    # the cluster.
    redis = _redis(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_engine(settings.storage.database_url, timeout_s=settings.storage.timeout_s)
        runner, watchdog = await supervised_runner(settings, metrics=gateway_metrics)
        store, traced, cluster = _stores(engine, redis, settings, gateway_metrics, telemetry.tracer)
        try:
            await _check_start(engine, settings)
            providers = build_providers(settings, runner)
            registry = ProviderRegistry(
                settings=settings,
                providers=providers,
                runner=runner,
                ttl_s=settings.selection.probe_ttl_s,
                clock=clock,
            )
            hooks = _webhooks(settings, engine, app, clock)
            event_log = _event_log(
                settings, traced, clock, gateway_metrics, mask, cluster, telemetry.tracer, hooks
            )
            local = LocalSessions(
                settings=settings,
                store=traced,
                events=event_log,
                providers=providers,
                registry=registry,
                clock=clock,
                metrics=gateway_metrics,
            )
            # One gateway, or one replica of several (claims in the store say where sessions run).
            manager: Sessions = local if cluster is None else ClusteredSessions(local, cluster)
            await _start(manager, hooks, store, settings)
            app.state.runner = runner
            app.state.providers = providers
            app.state.registry = registry
            app.state.manager = manager
            app.state.begin_shutdown = (stopper := _Stopper(manager, event_log, settings)).begin
            tasks = [
                asyncio.create_task(
                    background.maintain(manager, _period(settings)), name="maintenance"
                ),
                asyncio.create_task(
                    background.retention(settings, store, clock, local.history), name="retention"
                ),
                asyncio.create_task(watchdog.run(), name="process-watchdog"),
                asyncio.create_task(background.watch_token(token_file), name="token-file"),
                asyncio.create_task(
                    watch_loop_lag(
                        gateway_metrics.loop_lag.observe, settings.server.loop_lag_probe_s
                    ),
                    name="loop-lag",
                ),
            ]
            try:
                yield
            finally:
                await stopper.begin()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await _close(manager, event_log, cluster, providers.values(), hooks)
        finally:
            await runner.aclose()
            await asyncio.to_thread(store.close)  # after the event log's last write
            try:
                await checkpoint(engine)
            except Exception:
                log.exception("could not checkpoint the database's write-ahead log")
            await _dispose(engine, telemetry)

    app = FastAPI(
        title="Agent Gateway",
        version=__version__,
        summary="One HTTP, SSE and WebSocket API in front of the coding-agent CLIs.",
        lifespan=lifespan,
        # The document is served by app/api/health.py behind the token; the interactive docs
        # pages load their scripts from CDNs, so they are not served at all.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        # Every request a span, under the client's traceparent, when tracing is on.
        telemetry=telemetry.fastapi,
    )
    app.state.settings, app.state.mask = settings, mask
    app.state.metrics = gateway_metrics = GatewayMetrics()
    install_access_control(app.state, settings, token, token_file=token_file, redis=redis)
    problems.install(app)
    _include_routers(app, settings)
    _add_middleware(app, settings, mask)
    return app


async def _recover(manager: Sessions, store: Storage, settings: Settings) -> None:
    """End what a previous process left running, and forget the requests it was answering
    (a copy sent again with their idempotency key runs again)."""
    await manager.recover()
    if forgotten := await forget_unanswered(store, settings):
        log.info("forgot %d requests a previous gateway process left unanswered", forgotten)


def budget_refusal(settings: Settings) -> str | None:
    """Why these settings' budgets cannot be served (None: they can)."""
    names = {"admin", *(key.name for key in settings.server.api_keys)}
    return budget_keys_refusal(settings.budgets, names)


def _secrets(
    settings: Settings, token: str, mask: SecretMask | None, *, from_file: bool
) -> tuple[SecretMask, TokenFile | None]:
    """Add the configured secrets to ``mask``; with ``from_file``, the admin token file that
    the admin key follows (a rotation needs no restart; a configured token changes with the
    configuration only), each token read from it masked from then on."""
    mask = SecretMask() if mask is None else mask
    mask.add(secrets_of(settings, token, cli_secrets=cli_secrets(settings, os.environ)))
    if not from_file:
        return mask, None
    token_file = TokenFile(
        token_path(settings.storage.data_dir), token, issued=lambda new: mask.add([new])
    )
    mask.watch(token_file.check)
    return mask, token_file


def _add_middleware(app: FastAPI, settings: Settings, mask: SecretMask) -> None:
    """CORS (only for ``server.allowed_origins``), then the gate, then the answer to an
    unexpected error, then the problem mask, which runs first (every problem document passes
    it)."""
    if settings.server.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server.allowed_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID", "Idempotency-Key"],
            expose_headers=["Idempotent-Replayed", "Retry-After"],
        )
    app.add_middleware(
        GateMiddleware,
        allowed_hosts=settings.server.allowed_hosts,
        allowed_origins=settings.server.allowed_origins,
        max_body_bytes=settings.server.max_body_bytes,
    )
    app.add_middleware(problems.UnexpectedErrors)
    app.add_middleware(ProblemMaskMiddleware, mask=mask)


def _include_routers(app: FastAPI, settings: Settings) -> None:
    app.include_router(health.router)
    app.include_router(providers_api.router)
    app.include_router(sessions.router)
    app.include_router(changes.router)
    app.include_router(events.router)
    app.include_router(runs.router)
    app.include_router(usage.router)
    app.include_router(webhooks.router)
    app.include_router(metrics.build_router(public=settings.server.metrics_public))
    app.include_router(console.router)
    if settings.acp.enabled:
        app.include_router(acpsocket.router)


async def _close(
    manager: Sessions,
    event_log: EventLog,
    cluster: Cluster | None,
    providers: Iterable[Provider],
    hooks: Webhooks,
) -> None:
    """Stop the sessions, store their last events, give the sessions back, close the CLIs,
    stop the webhook dispatcher (what it has not sent goes out after the next start)."""
    await manager.aclose()
    await event_log.aclose()
    if cluster is not None:  # after the last event is stored: the others take over at once
        await cluster.aclose()
    for provider in providers:
        await provider.aclose()
    await hooks.aclose()


async def _start(manager: Sessions, hooks: Webhooks, store: Storage, settings: Settings) -> None:
    """Webhooks first (the endpoints known before recovery records anything), then recover
    what a previous run left and start the sessions' background work."""
    await hooks.start()
    await _recover(manager, store, settings)
    await manager.start()


def _event_log(
    settings: Settings,
    store: Storage,
    clock: Callable[[], datetime],
    metrics: GatewayMetrics,
    mask: SecretMask,
    cluster: Cluster | None = None,
    tracer: Tracer = OFF,
    hooks: Webhooks | None = None,
) -> EventLog:
    """The event log; configured secrets (keys, provider credentials) masked in payloads;
    with webhooks on, each batch's webhook messages stored with it."""
    return EventLog(
        store,
        queue_size=settings.server.subscriber_queue_size,
        coalesce_s=settings.server.coalesce_deltas_ms / 1000,
        clock=clock,
        max_events_per_session=settings.storage.max_events_per_session,
        max_lag_events=settings.limits.subscriber_max_lag_events,
        max_subscribers_per_session=settings.limits.max_subscribers_per_session,
        max_subscribers=stream_cap(settings),
        observer=EventObserver(metrics),
        metrics=metrics,
        mask=mask,
        cluster=cluster,
        tracer=tracer,
        outbox=hooks.outbox if hooks is not None and hooks.enabled else None,
    )


def _webhooks(
    settings: Settings, engine: AsyncEngine, app: FastAPI, clock: Callable[[], datetime]
) -> Webhooks:
    """The webhook endpoints, outbox and dispatcher (app/webhooks/); their secrets masked."""
    app.state.webhooks = hooks = Webhooks(
        settings.webhooks,
        store=WebhookStore(engine),
        metrics=WebhookMetrics(app.state.metrics.registry),
        mask=app.state.mask,
        clock=clock,
        holder=settings.cluster.replica_id,
        clustered=settings.cluster.redis_url is not None,
        key_names=[ADMIN, *(key.name for key in settings.server.api_keys)],
    )
    return hooks


class _Stopper:
    """The graceful stop: turns end first (briefly waited for), then every stream."""

    def __init__(self, manager: Sessions, events: EventLog, settings: Settings) -> None:
        self._manager = manager
        self._events = events
        self._grace_s = settings.server.shutdown_grace_s
        self._task: asyncio.Task[None] | None = None

    def begin(self) -> asyncio.Task[None]:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="shutdown")
        return self._task

    async def _run(self) -> None:
        log.info("shutting down: stopping running turns and closing event streams")
        closing = asyncio.create_task(self._manager.aclose(), name="stop-sessions")
        await asyncio.wait({closing}, timeout=min(TURNS_FIRST_S, self._grace_s / 4))
        self._events.shutdown(retry_ms=SHUTDOWN_RETRY_MS)
        try:
            async with asyncio.timeout(self._grace_s):
                await asyncio.shield(closing)
        except TimeoutError:
            log.warning("sessions did not stop within server.shutdown_grace_s; cutting them")
        except Exception:
            log.exception("stopping the sessions failed")


async def _dispose(engine: AsyncEngine, telemetry: Telemetry) -> None:
    """Close the database's connections, then export the last spans (the last turns')."""
    await engine.dispose()
    await telemetry.aclose()


async def _check_start(engine: AsyncEngine, settings: Settings) -> None:
    """What start-up needs: a schema it knows and, with snapshots on, a working Git and their
    directory (private); it fails otherwise, saying what to do."""
    await check_schema(engine)
    if (budgets := budget_refusal(settings)) is not None:
        raise ConfigError(budgets)
    if not settings.snapshots.enabled:
        return
    refusal = await git_refusal(settings)
    if refusal is not None:
        raise ConfigError(refusal)
    await asyncio.to_thread(settings.snapshots_dir.mkdir, mode=0o700, parents=True, exist_ok=True)


async def git_refusal(settings: Settings) -> str | None:
    """Why the gateway cannot start with these settings' snapshots (None: it can)."""
    if not settings.snapshots.enabled:
        return None
    problem = await git_problem(settings.snapshots.git)
    if problem is None:
        return None
    return (
        f"snapshots.enabled is on but {problem}: install Git 2.32 or later (Debian: "
        "apt-get install git), point snapshots.git at it, or set snapshots.enabled = false"
    )


def _period(settings: Settings) -> float:
    idle = min((p.idle_timeout_s for p in settings.providers.values()), default=600.0)
    return min(MAINTENANCE_PERIOD_S, idle / 4)
