"""The ``[server]`` section of the configuration: where the gateway listens, who may call it
and how much a connection may send (docs/security.md, "Safety defaults")."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator


class ApiKey(BaseModel):
    """A named client key: it sees and drives only the sessions it created, unless admin."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    """The key's name in the log, usage, budgets, webhooks and a session's ``owner``; ``admin``
    is reserved for ``server.token``."""
    token: SecretStr
    """What the client sends as ``Authorization: Bearer <token>``; at least 32 characters."""
    admin: bool = False
    """An admin key sees and drives every key's sessions and reaches the admin routes
    (``/v1/usage``, ``/metrics``, ``/v1/webhooks``)."""

    @field_validator("token")
    @classmethod
    def _long_enough(cls, token: SecretStr) -> SecretStr:
        if len(token.get_secret_value()) < 32:
            raise ValueError("an API key token needs at least 32 characters")
        return token


class ServerSettings(BaseModel):
    """Where the gateway listens, its keys, and the bounds on what one connection may send."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    """Address to bind. Anything but loopback needs a token that exists before the start
    (``server.token`` or a token file from ``agent-gateway token rotate``)."""
    port: int = Field(default=8765, ge=0, le=65535)
    """Port to bind."""
    token: SecretStr | None = None
    """The admin key clients send as ``Authorization: Bearer``; when unset, read from or
    generated into ``<data_dir>/token`` (mode 600)."""
    allowed_origins: list[str] = []
    """Exact browser origins (``scheme://host[:port]``) allowed for CORS and WebSocket; no
    wildcards."""
    allowed_hosts: list[str] = []
    """Extra names accepted in the ``Host`` header (localhost, 127.0.0.1 and ::1 always are)."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Request body limit (413 beyond)."""
    ws_max_message_bytes: int = Field(default=1024 * 1024, ge=1024)
    """WebSocket frame limit (the connection is closed with 1009 beyond)."""
    sse_keepalive_s: float = Field(default=15.0, gt=0)
    """Seconds between SSE keep-alive comments."""
    subscriber_queue_size: int = Field(default=1000, ge=10)
    """Events buffered per live subscriber before it catches up from the store."""
    coalesce_deltas_ms: float = Field(default=16.0, ge=0, le=1000)
    """Streamed deltas of one item (``message.delta``, ``reasoning.delta``, ``tool.output``)
    that follow each other within this window are joined into one event before they are
    stored and sent; the first after a pause goes out at once. 0 sends every delta as the
    CLI printed it. The default is one display frame at 60 Hz: CLIs stream deltas a few
    milliseconds apart (OpenCode about 150 a second), so a shorter window joins few of them."""
    api_keys: list[ApiKey] = []
    """Named keys besides ``token`` (which is the admin key): each sees only its sessions
    unless ``admin``."""
    allow_root: bool = False
    """Serve even when running as root (the CLIs then run as root too); off by default."""
    limit_concurrency: int = Field(default=1000, ge=1)
    """Open connections and requests beyond which the server answers 503."""
    request_head_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    """A request's head (line and headers) must arrive within this, counted from the
    connection or, on a kept-alive one, from the next request's first byte; a connection that
    misses it gets 408 and is closed."""
    request_body_min_rate_bytes_s: float = Field(default=1024.0, gt=0)
    """After a grace of ``request_head_timeout_s``, a request body must average this rate;
    a connection that falls behind gets 408 (when no response has begun) and is closed."""
    shutdown_grace_s: float = Field(default=10.0, gt=0)
    """On SIGTERM: how long turns, streams and CLI processes get to end before they are cut."""
    metrics_public: bool = False
    """Serve ``GET /metrics`` without a key (for a scraper on a trusted network)."""
    loop_lag_probe_s: float = Field(default=0.1, ge=0.001, le=60)
    """How often the event loop's lag is sampled (``agent_gateway_event_loop_lag_seconds``)."""

    @field_validator("api_keys")
    @classmethod
    def _keys_unique(cls, keys: list[ApiKey]) -> list[ApiKey]:
        names = [k.name for k in keys]
        tokens = [k.token.get_secret_value() for k in keys]
        if len(set(names)) != len(names) or len(set(tokens)) != len(tokens):
            raise ValueError("api_keys: every key needs its own name and its own token")
        if "admin" in names:
            raise ValueError("api_keys: the name 'admin' is reserved for server.token")
        return keys

    @field_validator("allowed_origins")
    @classmethod
    def _origins_are_exact(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if origin == "*" or "*" in origin:
                raise ValueError(f"{origin!r}: wildcards are not allowed, list exact origins")
            if not origin.startswith(("http://", "https://")) or origin.rstrip("/") != origin:
                raise ValueError(
                    f"{origin!r}: an origin is scheme://host[:port] with no path, "
                    "e.g. http://localhost:5173"
                )
        return origins
