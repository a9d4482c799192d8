"""An ``opencode serve`` process: shared by every OpenCode session, or one sandboxed session's.

    (none) ──first need──► spawn ─► "listening on" ─► /global/event connected ─► healthy ─► up
       ▲                                                                                  │
       └────────── next need ◄──── watcher: stdout ended → reap → ServerGone to all ◄──────┘

The server listens on a loopback port the gateway picks, behind HTTP basic auth with a
password generated for each start. One long-lived reader of ``GET /global/event`` (every
workspace's events, in 1.18.33 the per-directory ``/event`` only carries its own) routes each
event to the inbox of the turn that follows its ``ses_…`` thread; events of threads nobody
follows are dropped. A cut stream is reconnected, and every inbox is told that events may
have been lost (``StreamResumed``). When the process ends, every inbox gets ``ServerGone``;
the next need starts a new process, and threads continue there (they live in OpenCode's data
directory, not in the process). Starting once, restarting and stopping are the shared server
lifecycle's (``app.providers.shared_server``).

With the sandbox off, one server serves every session from ``/``. With it on, each session
has its own (``Placement``), in its sandbox: its workspace and its own home, whose
``XDG_DATA_HOME`` keeps the session's threads between servers. OpenCode installs its config
directory's plugin package (``@opencode-ai/plugin``) from the npm registry when it finds it
missing; a new home would be missing it, so the operator's installed copy (under
``$XDG_CONFIG_HOME/opencode``, as the container image ships it) is bound read-only into each
home's config directory instead (``plugin_binds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import signal
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeAlias

import httpx

from app.events import TurnError
from app.process.childspec import child_environment
from app.process.managed import ManagedProcess, ProcessError
from app.process.runner import ProcessRunner
from app.process.sandbox import Confinement
from app.providers.opencode.api import ApiError, OpenCodeApi
from app.providers.opencode.classifier import PROVIDER, error_for_exit
from app.providers.opencode.config import (
    SERVER_USERNAME,
    build_argv,
    passthrough_for,
    server_env,
)
from app.providers.opencode.sse import ServerEvent, SseDecoder, parse_event
from app.providers.shared_server import SHARED, Placement, ServerUnavailable, SharedServer, Up
from app.settings import ProviderSettings

__all__ = ["Delivery", "OpenCodeServer", "ServerGone", "ServerUnavailable", "StreamResumed"]

log = logging.getLogger(__name__)

HEARTBEAT_TIMEOUT_S = 35.0
"""A stream silent this long is dead: the server sends ``server.heartbeat`` every 10 s."""

HEALTH_TIMEOUT_S = 5.0
"""A health check gets this long; the route does no work, a slower answer is a sick server."""

REQUEST_TIMEOUT_S = 30.0
"""Bound on one HTTP request; the first request for a new workspace boots its instance."""

_RECONNECT_DELAYS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
_LISTENING = re.compile(rb"listening on (http://\S+)")

PLUGIN_FILES = ("package.json", "package-lock.json", "node_modules")
"""What OpenCode's "plugin package already installed" check reads in its config directory."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerGone:
    """The server process ended; ``error`` says how, for a turn that was running."""

    error: TurnError


@dataclass(frozen=True, slots=True)
class StreamResumed:
    """The event stream was cut and is back: events sent in between are lost."""


Delivery: TypeAlias = ServerEvent | ServerGone | StreamResumed


@dataclass(eq=False, kw_only=True)
class _Up(Up):
    api: OpenCodeApi
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    pump: asyncio.Task[None] | None = None


class OpenCodeServer(SharedServer[_Up, OpenCodeApi]):
    """Starts, watches and stops a server; routes its events to turn inboxes."""

    title = "opencode serve"
    owner = "OpenCode"
    label = PROVIDER

    def __init__(
        self,
        *,
        executable: str,
        settings: ProviderSettings,
        runner: ProcessRunner,
        parent_env: Mapping[str, str],
        placement: Placement = SHARED,
    ) -> None:
        super().__init__(runner=runner, stop_grace_s=settings.stop_grace_s, placement=placement)
        self._executable = executable
        self._settings = settings
        self._parent_env = dict(parent_env)
        self._inboxes: dict[str, asyncio.Queue[Delivery]] = {}

    def _alive(self, up: _Up) -> bool:
        return not up.gone.is_set()

    def _handle(self, up: _Up) -> OpenCodeApi:
        return up.api

    async def _retire(self, up: _Up) -> None:
        if up.watcher is not None:
            # Let the old process's ServerGone reach its followers before anyone subscribes
            # against the new one.
            await asyncio.gather(up.watcher, return_exceptions=True)

    async def unreachable(self, api: OpenCodeApi) -> bool:
        """``api`` got no answer: wait (bounded) for its process to end; return if it did.

        A server killed between turns is noticed here rather than by a failed turn: once its
        process is reaped, the caller's next ``ensure`` starts a new one.
        """
        up = self._up
        if up is None or up.api is not api:
            return True  # already replaced
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._settings.stop_grace_s):
                await up.gone.wait()
                if up.watcher is not None:
                    await asyncio.gather(up.watcher, return_exceptions=True)
        return up.gone.is_set()

    @contextlib.contextmanager
    def subscribe(self, thread_id: str) -> Iterator[asyncio.Queue[Delivery]]:
        """An inbox for ``thread_id``'s events (and server news) while the block runs."""
        inbox: asyncio.Queue[Delivery] = asyncio.Queue()
        self._inboxes[thread_id] = inbox
        try:
            yield inbox
        finally:
            if self._inboxes.get(thread_id) is inbox:
                del self._inboxes[thread_id]

    async def ping(self) -> str | None:
        """``None`` when the server answers its health route, else why not (starts it)."""
        try:
            api = await self.ensure()
            await api.health(timeout_s=HEALTH_TIMEOUT_S)
        except (ServerUnavailable, ApiError) as exc:
            return f"opencode serve is not healthy: {exc}"
        return None

    async def _shut(self, up: _Up, *, at_once: bool) -> None:
        # `opencode serve` ignores stdin EOF (1.18.33): SIGTERM at once, then the usual
        # bounded stop (``at_once``: SIGKILL right after).
        await up.process.signal_group(signal.SIGTERM)
        grace = 0 if at_once else self._settings.stop_grace_s
        await up.process.stop(grace_s=grace, term_s=0 if at_once else 3.0)
        if up.watcher is not None:
            await asyncio.gather(up.watcher, return_exceptions=True)
        await self._release(up)

    def _confined(self, confinement: Confinement, env: dict[str, str]) -> Confinement:
        binds = plugin_binds(self._parent_env, self._settings.env, Path(env["HOME"]))
        return replace(confinement, files=(*confinement.files, *binds))

    # --- start ----------------------------------------------------------------------------

    async def _start(self) -> _Up:
        settings = self._settings
        password = secrets.token_urlsafe(32)
        env = child_environment(
            self._parent_env,
            passthrough=passthrough_for(settings.model, settings.config),
            overlay=server_env(
                overlay=settings.env,
                config=settings.config,
                password=password,
                project_config=settings.project_config,
            ),
        )
        argv = build_argv(
            executable=self._executable, port=_free_port(), extra_args=settings.extra_args
        )
        process = await self._spawn(tuple(argv), env)
        up: _Up | None = None
        try:
            async with asyncio.timeout(settings.startup_timeout_s):
                base_url = await _listening(process)
                client = httpx.AsyncClient(
                    base_url=base_url,
                    auth=httpx.BasicAuth(SERVER_USERNAME, password),
                    timeout=REQUEST_TIMEOUT_S,
                    trust_env=False,  # loopback only: no proxy from the gateway's env
                )
                up = _Up(process=process, api=OpenCodeApi(client), generation=self._generation)
                up.pump = asyncio.create_task(self._pump(up), name="opencode-events")
                # Connected before any prompt, so that no turn's first events are missed.
                await up.connected.wait()
                await up.api.health()
        except (TimeoutError, ApiError, ProcessError) as exc:
            await process.stop(grace_s=0, term_s=self._settings.stop_grace_s)
            if up is not None:
                await self._release(up)
            reason = str(exc) or "no answer within startup_timeout_s"
            tail = process.stderr_tail.strip()[-2000:] or "(empty)"
            raise ServerUnavailable(
                f"opencode serve did not start: {reason}; stderr: {tail}"
            ) from exc
        up.watcher = asyncio.create_task(self._watch(up), name="opencode-watch")
        log.info("opencode serve pid=%d up at %s (start %d)", process.pid, base_url, up.generation)
        return up

    # --- running --------------------------------------------------------------------------

    async def _pump(self, up: _Up) -> None:
        """Read ``/global/event`` for as long as the process lives, reconnecting when cut."""
        failures = 0
        timeout = httpx.Timeout(REQUEST_TIMEOUT_S, read=HEARTBEAT_TIMEOUT_S)
        while not up.gone.is_set():
            try:
                async with up.api.client.stream(
                    "GET", "/global/event", timeout=timeout
                ) as response:
                    if response.status_code != 200:
                        raise ApiError(f"HTTP {response.status_code}", status=response.status_code)
                    decoder = SseDecoder()
                    async for line in response.aiter_lines():
                        data = decoder.feed(line)
                        event = parse_event(data) if data is not None else None
                        if event is None:
                            continue
                        if event.type == "server.connected":
                            if up.connected.is_set():
                                self._broadcast(StreamResumed())
                            up.connected.set()
                            failures = 0
                        elif event.session_id is not None:
                            inbox = self._inboxes.get(event.session_id)
                            if inbox is not None:
                                inbox.put_nowait(event)
            except (httpx.HTTPError, ApiError) as exc:
                log.info("opencode event stream of pid=%d cut: %r", up.process.pid, exc)
            except Exception:
                # A bug here must not end the routing of every session's events.
                log.exception("opencode event stream of pid=%d failed", up.process.pid)
            if up.gone.is_set():
                return
            # Back off while the server refuses the stream, so a sick server is not hammered.
            await asyncio.sleep(_RECONNECT_DELAYS_S[min(failures, len(_RECONNECT_DELAYS_S) - 1)])
            failures += 1

    async def _watch(self, up: _Up) -> None:
        """Drain the server's stdout; when it ends, reap the process and tell every inbox."""
        process = up.process
        with contextlib.suppress(ProcessError):
            while (line := await process.read_line()) is not None:
                log.debug("opencode serve: %.500r", line)
        up.gone.set()
        returncode = await self._reap(process)
        await self._release(up)
        if self._up is up:
            self._up = None
        self._ended(process, f"status {returncode}")
        self._broadcast(ServerGone(error=error_for_exit(returncode, process.stderr_tail)))

    def _broadcast(self, news: ServerGone | StreamResumed) -> None:
        for inbox in self._inboxes.values():
            inbox.put_nowait(news)

    async def _release(self, up: _Up) -> None:
        up.gone.set()
        if up.pump is not None:
            up.pump.cancel()
            await asyncio.gather(up.pump, return_exceptions=True)
        await up.api.client.aclose()


async def _listening(process: ManagedProcess) -> str:
    """Wait for the ``opencode server listening on http://…`` line; return that URL.

    Requests sent before it can hang unanswered (1.18.33, obs), so nothing is sent earlier.
    """
    while True:
        line = await process.read_line()
        if line is None:
            returncode = await process.wait()
            raise ProcessError(f"the process exited with status {returncode} before listening")
        match = _LISTENING.search(line)
        if match:
            return match.group(1).decode()
        log.debug("opencode serve: %.500r", line)


def plugin_binds(
    parent_env: Mapping[str, str], overlay: Mapping[str, str], home: Path
) -> tuple[tuple[Path, Path], ...]:
    """``(source, target)`` binds of the operator's installed plugin package into the config
    directory of ``home`` (created here); none when the operator has none installed."""
    env = {**parent_env, **overlay}
    config = env.get("XDG_CONFIG_HOME") or (
        str(Path(env["HOME"]) / ".config") if env.get("HOME") else None
    )
    if config is None:
        return ()
    source = Path(config) / "opencode"
    if not all((source / name).exists() for name in PLUGIN_FILES[1:]):
        return ()
    target = home / ".config" / "opencode"
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    binds: list[tuple[Path, Path]] = []
    for name in PLUGIN_FILES:
        path = source / name
        if path.is_dir():
            (target / name).mkdir(mode=0o700, exist_ok=True)
        elif path.is_file():
            (target / name).touch(mode=0o600, exist_ok=True)
        else:
            continue
        binds.append((path.resolve(), target / name))
    return tuple(binds)


def _free_port() -> int:
    # The port is free now; OpenCode binds it a moment later. A clash fails the start with
    # an "address in use" on stderr, reported as such, and the next need picks another port.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
