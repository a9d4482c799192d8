"""Gateway configuration: a TOML file overridden by ``GATEWAY_*`` environment variables.

The file comes from ``--config`` or ``GATEWAY_CONFIG``; every setting can be overridden by an
environment variable named after its path, with ``__`` between levels
(``GATEWAY_SERVER__PORT=9000``, ``GATEWAY_PROVIDERS__CLAUDE_CODE__MODEL=claude-sonnet-4-5``).
Invalid configuration raises ``ConfigError`` whose message names each bad setting and what
to do about it. Every setting is documented in README.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from app.acp_settings import AcpSettings
from app.budget_settings import BudgetSettings
from app.cluster_settings import ClusterSettings
from app.events import ApprovalMode, RoutingStrategy
from app.limits import LimitsSettings as LimitsSettings  # noqa: PLC0414 - re-exported
from app.sandbox_settings import SandboxMode as SandboxMode  # noqa: PLC0414 - re-exported
from app.sandbox_settings import SandboxSettings
from app.settingsenv import EnvSource
from app.snapshot_settings import SnapshotSettings
from app.telemetry_settings import TelemetrySettings
from app.webhook_settings import WebhookSettings

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A name an operator gives in the configuration (a retry strategy) and requests repeat."""

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PINNED_MODULES = Path(
    os.environ.get("AGENT_GATEWAY_AGENTS_DIR") or PROJECT_ROOT / "agents" / "node_modules"
)
"""Where ``make setup`` installs the CLIs pinned in agents/package.json;
``AGENT_GATEWAY_AGENTS_DIR`` points elsewhere (``make agents-latest`` tries newer releases)."""
PINNED_CLI_BIN = PINNED_MODULES / ".bin"
"""The pinned CLIs' commands."""

MEMBER_PATTERN = r"[a-z0-9][a-z0-9._-]*"
"""A family member's part of a provider name (``gemini`` in ``acp:gemini``)."""
PROVIDER_KEY = re.compile(rf"[a-z][a-z0-9_]*(:{MEMBER_PATTERN})?")
"""How a provider is named in ``providers`` and ``selection``: ``claude_code``, or a family
member such as ``acp:gemini``. Which names exist is the provider catalog's
(``app.providers.catalog.resolve``), not the settings'."""


class ConfigError(Exception):
    """The configuration cannot be used; the message says what to fix."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApiKey(_Section):
    """A named client key: it sees and drives only the sessions it created, unless admin."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    token: SecretStr
    admin: bool = False

    @field_validator("token")
    @classmethod
    def _long_enough(cls, token: SecretStr) -> SecretStr:
        if len(token.get_secret_value()) < 32:
            raise ValueError("an API key token needs at least 32 characters")
        return token


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    token: SecretStr | None = None
    """Bearer token clients must send; generated into ``<data_dir>/token`` when unset."""
    allowed_origins: list[str] = []
    """Browser origins (``scheme://host[:port]``) allowed to call the API and open WebSockets."""
    allowed_hosts: list[str] = []
    """Host names accepted in the ``Host`` header besides localhost, 127.0.0.1 and ::1."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    ws_max_message_bytes: int = Field(default=1024 * 1024, ge=1024)
    sse_keepalive_s: float = Field(default=15.0, gt=0)
    subscriber_queue_size: int = Field(default=1000, ge=10)
    coalesce_deltas_ms: float = Field(default=16.0, ge=0, le=1000)
    """Streamed deltas of one item (``message.delta``, ``reasoning.delta``, ``tool.output``)
    that follow each other within this window are joined into one event before they are
    stored and sent; the first after a pause goes out at once. 0 sends every delta as the
    CLI printed it. The default is one display frame at 60 Hz: CLIs stream deltas a few
    milliseconds apart (OpenCode about 150 a second), so a shorter window joins few of them."""
    api_keys: list[ApiKey] = []
    """Named keys besides ``token`` (which is the admin key): each sees only its sessions."""
    allow_root: bool = False
    """Serve even when running as root (the CLIs then run as root too); off by default."""
    limit_concurrency: int = Field(default=1000, ge=1)
    """Open connections and requests beyond which the server answers 503."""
    request_head_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    """A request's head (line and headers) must arrive within this, counted from the
    connection or the request's first byte; a connection that misses it gets 408 and is
    closed."""
    request_body_min_rate_bytes_s: float = Field(default=1024.0, gt=0)
    """After a grace of ``request_head_timeout_s``, a request body must average this rate;
    a connection that falls behind gets 408 (when no response has begun) and is closed."""
    shutdown_grace_s: float = Field(default=10.0, gt=0)
    """On SIGTERM: how long streams and CLI processes get to end before they are cut."""
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


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "agent-gateway"


STORAGE_SCHEMES = ("sqlite+aiosqlite", "postgresql+asyncpg")
"""The database engines and drivers the gateway stores its state with."""


class StorageSettings(_Section):
    data_dir: Path = Field(default_factory=_default_data_dir)
    """Holds the SQLite database (unless ``url`` says otherwise) and the generated token."""
    url: str | None = None
    """SQLAlchemy async URL; defaults to ``sqlite+aiosqlite:///<data_dir>/gateway.db``.
    ``postgresql+asyncpg://user@host:5432/database`` keeps the state in PostgreSQL."""
    retention_days: int = Field(default=30, ge=1)
    cleanup_interval_s: float = Field(default=3600.0, gt=0)
    max_events_per_session: int = Field(default=1_000_000, ge=100)
    """Older events of a longer session are pruned; a cursor before them gets a resync."""
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    """PostgreSQL: the longest a connect or one statement may take; past it the call fails as
    ``storage_unavailable`` (503) rather than hang. (SQLite waits out its 30 s busy timeout.)"""

    @field_validator("url")
    @classmethod
    def _known_engine(cls, url: str | None) -> str | None:
        if url is None:
            return None
        scheme = url.partition("://")[0]
        if scheme not in STORAGE_SCHEMES:
            raise ValueError(
                f"storage.url must start with one of {', '.join(STORAGE_SCHEMES)}:// (a SQLite "
                f"file, or PostgreSQL through asyncpg), not {scheme or url!r}"
            )
        return url

    @property
    def database_url(self) -> str:
        return self.url or f"sqlite+aiosqlite:///{self.data_dir / 'gateway.db'}"


class WorkspaceSettings(_Section):
    roots: list[Path] = Field(default_factory=lambda: [Path.home()])
    """Directories a session's workspace, or the repository it asks a worktree of, must
    resolve inside (after following symlinks)."""
    worktrees_root: Path | None = None
    """Where each session that names a ``repository`` gets its worktree
    (``<worktrees_root>/<session id>``); default ``<data_dir>/worktrees``. Created when
    first needed. No session may name a workspace inside it, and every sandbox hides it
    but for the session's own worktree."""

    @field_validator("worktrees_root")
    @classmethod
    def _absolute(cls, root: Path | None) -> Path | None:
        if root is not None and not root.is_absolute():
            raise ValueError(f"{root} must be an absolute path")
        return root


class ProviderSettings(_Section):
    enabled: bool = True
    executable: str | None = None
    """Path or command name; defaults to the pinned CLI from agents/, then to PATH."""
    model: str | None = None
    """Model used when a session does not name one."""
    env: dict[str, str] = {}
    """Variables added to the CLI's allow-listed environment (API keys, base URLs, proxies)."""
    extra_args: list[str] = []
    command: list[str] = []
    """The whole command line of an ``acp:<name>`` agent the gateway has no recipe for
    (``["goose", "acp"]``); built-in agents take it from their recipe. Other providers
    refuse it."""
    config: dict[str, JsonValue] = {}
    """CLI configuration layered over the user's own, never written into it: Codex ``-c``
    overrides (dotted keys), OpenCode config (merged into ``OPENCODE_CONFIG_CONTENT``)."""
    project_config: bool = False
    """Whether the agent may load the workspace's own agent configuration (its MCP servers,
    hooks, plugins, settings, permission rules and instruction files, such as Claude Code's
    ``.claude/settings.json`` and ``.mcp.json``). Off by default: a repository is untrusted
    input, and on an agent that has no switch for it the gateway says so (README,
    ``GET /v1/providers``)."""
    idle_timeout_s: float = Field(default=600.0, gt=0)
    """A live CLI process with no turn for this long is closed; the next turn resumes it."""
    turn_idle_timeout_s: float = Field(default=900.0, gt=0)
    """A running turn with no CLI output for this long fails as ``idle_timeout``."""
    startup_timeout_s: float = Field(default=60.0, gt=0)
    interrupt_grace_s: float = Field(default=10.0, gt=0)
    """After an interrupt, how long the CLI has to end the turn before its process is stopped."""
    stop_grace_s: float = Field(default=5.0, gt=0)
    sandbox: SandboxMode | None = None
    """This provider's sandbox, over ``sandbox.mode``."""
    credential_check: bool = True
    """Whether the gateway looks for the CLI's credential (an API key variable, a login file,
    a token, a custom model endpoint) and holds the provider back as ``needs_login`` when it
    finds none. Off for a credential the gateway cannot see (a keychain, a cloud SDK's own
    files, a model provider in the CLI's own config file): the provider counts as logged in,
    and ``doctor`` says its credential was not checked."""


class BalanceWeights(_Section):
    """How much each figure counts in the ``balanced`` strategy (0 ignores it)."""

    latency: float = Field(default=1.0, ge=0)
    cost: float = Field(default=1.0, ge=0)
    failure_rate: float = Field(default=1.0, ge=0)


class SelectionSettings(_Section):
    default: str = "claude_code"
    fallback_chain: list[str] = []
    scenarios: dict[str, list[str]] = {}
    probe_ttl_s: float = Field(default=300.0, gt=0)
    """How long a provider's health probe result is reused."""
    strategy: RoutingStrategy = "ordered"
    """How candidates that can serve are ranked when neither the request nor its scenario
    names a strategy."""
    strategies: dict[str, RoutingStrategy] = {}
    """Scenario label → routing strategy for that scenario's requests."""
    weights: BalanceWeights = BalanceWeights()
    window_turns: int = Field(default=50, ge=1, le=10_000)
    """Each provider's figures are taken over its last this many measured turns."""
    min_turns: int = Field(default=3, ge=0, le=1000)
    """A provider with fewer measured turns is explored (tried first) by the measuring
    strategies."""
    failover: bool = False
    """Whether sessions that do not say (``fallback``) move to the next provider of their
    chain when theirs fails for good, with a hand-off of the conversation so far."""
    failover_scenarios: list[str] = []
    """Scenarios whose sessions fail over unless they say ``fallback: false``."""


class RetryStrategy(_Section):
    delays_s: list[float] = Field(min_length=1)


UsageLimitAction = Literal["wait", "fallback", "fail"]


class RetrySettings(_Section):
    enabled: bool = True
    strategies: dict[str, RetryStrategy] = Field(
        default_factory=lambda: {"default": RetryStrategy(delays_s=[10.0, 20.0, 60.0])}
    )
    continuation_prompt: str = (
        "The previous attempt was interrupted by an error. Continue the task from where it stopped."
    )
    usage_limit: UsageLimitAction = "wait"
    """What a turn does when the agent hits its usage limit: ``wait`` for the reset the CLI
    reported (then continue in the same thread), ``fallback`` to the next provider (sessions
    that allow failover), or ``fail``. A wait that cannot be (no reset time, or later than
    ``usage_limit_max_wait_s``) falls back when the session allows it, else fails."""
    usage_limit_max_wait_s: float = Field(default=6 * 3600.0, gt=0, le=7 * 24 * 3600.0)
    """The longest wait for a usage limit's reset (Claude's window is 5 hours)."""
    cli_request_retries: int = Field(default=2, ge=0, le=10)
    """Retries each CLI makes itself for one failed model request before it gives up
    (Claude Code ``CLAUDE_CODE_MAX_RETRIES``, Codex ``request_max_retries``)."""
    cli_stream_retries: int = Field(default=2, ge=0, le=10)
    """Reconnects Codex makes for a dropped or idle model stream (``stream_max_retries``)."""

    @model_validator(mode="after")
    def _has_default(self) -> RetrySettings:
        if "default" not in self.strategies:
            raise ValueError("retry.strategies must define a 'default' strategy")
        for name in self.strategies:
            if not re.fullmatch(NAME_PATTERN, name):
                raise ValueError(
                    f"retry.strategies: {name!r} is not a valid name (letters, digits, '_', "
                    "'.' and '-', starting with a letter or digit, at most 64 characters)"
                )
        return self


class SessionSettings(_Section):
    approval_timeout_s: float = Field(default=600.0, gt=0)
    """A pending approval not answered in time is resolved as a deny with reason ``expired``."""
    allowed_approval_modes: list[ApprovalMode] = ["ask", "auto_edits", "read_only"]
    """Modes a request may ask for; ``allow_all`` (no prompts at all) only if listed here."""
    default_approval_mode: ApprovalMode = "ask"
    turn_timeout_s: float = Field(default=3600.0, gt=0)
    """Wall-clock limit of one turn, all attempts and retry waits included."""
    allow_updated_input: bool = True
    """Whether a client may allow a tool call with edited input (``updated_input``); every
    edit is recorded on the approval and its ``approval.resolved`` event."""
    handoff_max_chars: int = Field(default=24_000, ge=1_000, le=1_000_000)
    """The most a failover's hand-off (the conversation so far, for the new agent) may hold;
    the newest turns are kept whole, older ones summarized by truncation."""


class Settings(BaseSettings):
    """Everything the gateway reads at start-up."""

    model_config = SettingsConfigDict(
        env_prefix="GATEWAY_",
        env_nested_delimiter="__",
        extra="forbid",
        nested_model_default_partial_update=True,
    )

    server: ServerSettings = ServerSettings()
    storage: StorageSettings = Field(default_factory=StorageSettings)
    workspaces: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    """The configured providers' sections; ``app.providers.catalog.resolve`` adds the others
    with their defaults."""
    selection: SelectionSettings = SelectionSettings()
    retry: RetrySettings = Field(default_factory=RetrySettings)
    sessions: SessionSettings = SessionSettings()
    limits: LimitsSettings = LimitsSettings()
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    sandbox: SandboxSettings = SandboxSettings()
    snapshots: SnapshotSettings = SnapshotSettings()
    acp: AcpSettings = AcpSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    budgets: BudgetSettings = BudgetSettings()
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "text"] = "json"
    """``json``: one JSON object per line with session, turn and provider ids; ``text``: plain."""
    _config_file: Path | None = PrivateAttr(default=None)

    @property
    def config_file(self) -> Path | None:
        """The TOML file these settings were read from, if any (kept out of every sandbox)."""
        return self._config_file

    @property
    def worktrees_root(self) -> Path:
        """Where sessions' worktrees are made."""
        return self.workspaces.worktrees_root or self.storage.data_dir / "worktrees"

    @property
    def homes_dir(self) -> Path:
        """Where each session's own CLI home is created."""
        return self.sandbox.homes_dir or self.storage.data_dir / "homes"

    @property
    def snapshots_dir(self) -> Path:
        """Where each session's workspace record is kept."""
        return self.snapshots.dir or self.storage.data_dir / "snapshots"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = init_settings.init_kwargs.pop("_toml_file", None)  # type: ignore[attr-defined]
        sources: list[PydanticBaseSettingsSource] = [init_settings, EnvSource(settings_cls)]
        if toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)

    @field_validator("providers")
    @classmethod
    def _provider_keys(cls, providers: dict[str, ProviderSettings]) -> dict[str, ProviderSettings]:
        for name in providers:
            if not PROVIDER_KEY.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a provider name (lower-case letters, digits and '_', "
                    "or family:name such as acp:gemini)"
                )
        return providers

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.sessions.default_approval_mode not in self.sessions.allowed_approval_modes:
            raise ValueError(
                f"sessions.default_approval_mode {self.sessions.default_approval_mode!r} "
                "must be one of sessions.allowed_approval_modes"
            )
        if not self.workspaces.roots:
            raise ValueError("workspaces.roots is empty: list at least one directory")
        if self.cluster.redis_url is not None and not self.storage.database_url.startswith(
            "postgresql"
        ):
            raise ValueError(
                "cluster.redis_url is set but storage.url is a SQLite file, which one machine's "
                "processes share at most: several replicas keep their state in PostgreSQL "
                '(storage.url = "postgresql+asyncpg://user@host:5432/gateway")'
            )
        return self


def load_settings(
    config_file: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Read the TOML file (``config_file`` or ``$GATEWAY_CONFIG``) and the environment.

    ``environ`` is where ``GATEWAY_CONFIG`` is looked up (default ``os.environ``); the
    ``GATEWAY_*`` overrides themselves always come from ``os.environ``. Raises
    ``ConfigError`` naming every invalid setting.
    """
    env = os.environ if environ is None else environ
    path = config_file or (Path(env["GATEWAY_CONFIG"]) if env.get("GATEWAY_CONFIG") else None)
    if path is not None and not path.is_file():
        raise ConfigError(
            f"configuration file {path} does not exist (from --config/GATEWAY_CONFIG)"
        )
    try:
        if path is not None:
            overrides["_toml_file"] = path
        settings = Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path)) from None
    except ValueError as exc:  # malformed TOML
        raise ConfigError(f"cannot read configuration file {path}: {exc}") from None
    settings._config_file = None if path is None else path.resolve()
    _check_roots(settings)
    return settings


def _check_roots(settings: Settings) -> None:
    for root in settings.workspaces.roots:
        if not root.is_absolute():
            raise ConfigError(f"workspaces.roots: {root} must be an absolute path")
        if not root.is_dir():
            raise ConfigError(
                f"workspaces.roots: {root} is not an existing directory; create it or remove it"
            )


def _describe(exc: ValidationError, path: Path | None) -> str:
    where = f" in {path}" if path else ""
    lines = [f"invalid configuration{where}:"]
    for error in exc.errors():
        location = ".".join(str(part) for part in error["loc"]) or "(top level)"
        env_name = "GATEWAY_" + "__".join(str(p).upper() for p in error["loc"])
        lines.append(f"  - {location}: {error['msg']} (set it in the file or via {env_name})")
    return "\n".join(lines)
