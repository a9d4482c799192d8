"""Gateway configuration: a TOML file overridden by ``GATEWAY_*`` environment variables.

The file comes from ``--config`` or ``GATEWAY_CONFIG``; every setting can be overridden by an
environment variable named after its path, with ``__`` between levels
(``GATEWAY_SERVER__PORT=9000``, ``GATEWAY_PROVIDERS__CLAUDE_CODE__MODEL=claude-sonnet-4-5``).
Invalid configuration raises ``ConfigError`` whose message names each bad setting and what
to do about it. Every setting is documented by its docstring, from which
scripts/gen_docs.py writes docs/reference/configuration.md.
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
    PrivateAttr,
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
from app.configerrors import describe
from app.events import ApprovalMode, RoutingStrategy
from app.limits import LimitsSettings as LimitsSettings  # noqa: PLC0414 - re-exported
from app.provider_settings import ProviderSettings as ProviderSettings  # noqa: PLC0414
from app.sandbox_settings import SandboxMode as SandboxMode  # noqa: PLC0414 - re-exported
from app.sandbox_settings import SandboxSettings
from app.server_settings import ApiKey as ApiKey  # noqa: PLC0414 - re-exported
from app.server_settings import ServerSettings as ServerSettings  # noqa: PLC0414
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


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "agent-gateway"


STORAGE_SCHEMES = ("sqlite+aiosqlite", "postgresql+asyncpg")
"""The database engines and drivers the gateway stores its state with."""


class StorageSettings(_Section):
    """Where the gateway keeps its state, and for how long."""

    data_dir: Path = Field(default_factory=_default_data_dir)
    """Holds the SQLite database (unless ``url`` says otherwise) and the generated token;
    0700, and the database files in it 0600."""
    url: str | None = None
    """The database, as an SQLAlchemy async URL: a SQLite file (``sqlite+aiosqlite:///…``,
    default ``<data_dir>/gateway.db``) or PostgreSQL
    (``postgresql+asyncpg://user[:password]@host:5432/database``; docs/operations/replicas.md)."""
    retention_days: int = Field(default=30, ge=1)
    """Bindings unused this long are deleted, with their sessions' events, CLI homes,
    worktrees and workspace records."""
    cleanup_interval_s: float = Field(default=3600.0, gt=0)
    """How often the retention task runs (``agent-gateway cleanup`` runs it at once)."""
    max_events_per_session: int = Field(default=1_000_000, ge=100)
    """Older events of a longer session are pruned; a cursor before them gets
    ``resync_required`` (410 for a JSON page)."""
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
    """Where sessions may work."""

    roots: list[Path] = Field(default_factory=lambda: [Path.home()])
    """Directories a session's workspace, or the repository it asks a worktree of, must
    resolve inside (after following symlinks)."""
    worktrees_root: Path | None = None
    """Where each session that names a ``repository`` gets its worktree
    (``<worktrees_root>/<session id>``); default ``<data_dir>/worktrees``. Created when
    first needed. No session may name a workspace inside it, and every sandbox hides it
    but for the session's own worktree. Replicas share it, as they share the repositories."""

    @field_validator("worktrees_root")
    @classmethod
    def _absolute(cls, root: Path | None) -> Path | None:
        if root is not None and not root.is_absolute():
            raise ValueError(f"{root} must be an absolute path")
        return root


class BalanceWeights(_Section):
    """How much each figure counts in the ``balanced`` strategy (0 ignores it)."""

    latency: float = Field(default=1.0, ge=0)
    """Weight of the median time to first text."""
    cost: float = Field(default=1.0, ge=0)
    """Weight of the mean cost per turn."""
    failure_rate: float = Field(default=1.0, ge=0)
    """Weight of the share of failed turns."""


class SelectionSettings(_Section):
    """How a session's provider is chosen, ranked and replaced (docs/concepts/selection.md)."""

    default: str = "claude_code"
    """Provider for sessions that name none."""
    fallback_chain: list[str] = []
    """Providers to try, in order, when the default is not available."""
    scenarios: dict[str, list[str]] = {}
    """Scenario label → providers to try, e.g. ``{ code_analysis = ["claude_code"] }``."""
    probe_ttl_s: float = Field(default=300.0, gt=0)
    """How long a provider's health probe result is reused."""
    strategy: RoutingStrategy = "ordered"
    """How candidates that can serve are ranked when neither the request nor its scenario
    names a strategy."""
    strategies: dict[str, RoutingStrategy] = {}
    """Scenario label → routing strategy for that scenario's requests, e.g.
    ``{ code_analysis = "lowest_latency" }``."""
    weights: BalanceWeights = BalanceWeights()
    """How much each figure counts in the ``balanced`` strategy (``0`` ignores it)."""
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
    """A named retry schedule."""

    delays_s: list[float] = Field(min_length=1)
    """The waits before each further attempt: one attempt more than there are delays."""


UsageLimitAction = Literal["wait", "fallback", "fail"]


class RetrySettings(_Section):
    """How a broken turn is retried in the same thread (docs/concepts/recovery.md)."""

    enabled: bool = True
    """Whether broken turns are retried in the same thread."""
    strategies: dict[str, RetryStrategy] = Field(
        default_factory=lambda: {"default": RetryStrategy(delays_s=[10.0, 20.0, 60.0])}
    )
    """Named retry schedules; ``default`` is required, a request picks another by name."""
    continuation_prompt: str = (
        "The previous attempt was interrupted by an error. Continue the task from where it stopped."
    )
    """What a retry attempt sends in the same thread."""
    usage_limit: UsageLimitAction = "wait"
    """What a turn does when the agent hits its usage limit: ``wait`` for the reset the CLI
    reported (then continue in the same thread), ``fallback`` to the next provider (sessions
    that allow failover), or ``fail``. A wait that cannot be (no reset time, or later than
    ``usage_limit_max_wait_s``) falls back when the session allows it, else fails."""
    usage_limit_max_wait_s: float = Field(default=6 * 3600.0, gt=0, le=7 * 24 * 3600.0)
    """The longest wait for a usage limit's reset (Claude's window is 5 hours): a ceiling,
    a request may ask for less (more is a 422 naming it)."""
    cli_request_retries: int = Field(default=2, ge=0, le=10)
    """Retries each CLI makes itself for one failed model request before it gives up:
    Claude Code ``CLAUDE_CODE_MAX_RETRIES``, Codex ``request_max_retries`` (through a custom
    model provider only); OpenCode has no setting (5)."""
    cli_stream_retries: int = Field(default=2, ge=0, le=10)
    """Reconnects Codex makes for a dropped or idle model stream (``stream_max_retries``,
    through a custom model provider only)."""

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
    """What sessions may ask for, and how long their turns and approvals may take."""

    approval_timeout_s: float = Field(default=600.0, gt=0)
    """A pending approval not answered in time is resolved as a deny with reason ``expired``."""
    allowed_approval_modes: list[ApprovalMode] = ["ask", "auto_edits", "read_only"]
    """Modes a request may ask for; ``allow_all`` (no prompts at all) only if listed here."""
    default_approval_mode: ApprovalMode = "ask"
    """Mode for sessions that name none; one of ``allowed_approval_modes``."""
    turn_timeout_s: float = Field(default=3600.0, gt=0)
    """Wall-clock limit of one turn, all attempts and retry waits included."""
    allow_updated_input: bool = True
    """Whether a client may allow a tool call with edited input (``updated_input``); every
    edit is recorded on the approval and its ``approval.resolved`` event."""
    handoff_max_chars: int = Field(default=24_000, ge=1_000, le=1_000_000)
    """The most a failover's hand-off (the conversation so far, for the new agent) may hold;
    the newest turns are kept whole, older ones summarized by truncation, the oldest left
    out; a failed prompt longer than that goes alone, whole."""


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
    """One table per provider (``[providers.claude_code]``, ``[providers."acp:gemini"]``):
    a built-in CLI provider without one runs with these defaults, an ACP agent is a provider
    only once it has one (``app.providers.catalog.resolve``)."""
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
    """The least severe log lines written."""
    log_format: Literal["auto", "json", "text"] = "auto"
    """``json``: one JSON object per line with session, turn and provider ids; ``text``: one
    plain line each, for a person; ``auto``: ``text`` when stderr is a terminal, else
    ``json``."""
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
        text = path.read_text(errors="replace") if path is not None else None
        message = describe(exc, model=Settings, path=path, text=text, environ=os.environ)
        raise ConfigError(message) from None
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
