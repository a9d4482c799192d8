"""A ``[providers.<name>]`` section of the configuration: how one agent CLI is run
(docs/agents/)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.sandbox_settings import SandboxMode


class ProviderSettings(BaseModel):
    """How one provider's CLI is started: which executable, model, credentials and limits."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Build this provider at start-up; a disabled one is never chosen."""
    executable: str | None = None
    """The CLI to run, a path or a command name; default the pinned CLI in agents/, then
    ``PATH``. One that cannot be found makes only this provider unavailable (the gateway
    starts; ``/readyz`` and ``GET /v1/providers`` say why)."""
    model: str | None = None
    """Model used when a session does not name one (unset: the CLI's own default)."""
    env: dict[str, str] = {}
    """Variables added to the CLI's allow-listed environment: API keys, ``ANTHROPIC_BASE_URL``,
    proxies, ``HOME``. Secret-named values are masked in events and logs."""
    extra_args: list[str] = []
    """Extra CLI arguments, appended after the gateway's own."""
    command: list[str] = []
    """The whole command line of an ``acp:<name>`` agent the gateway has no recipe for
    (``["goose", "acp"]``); built-in agents take it from their recipe. Other providers
    refuse it."""
    config: dict[str, JsonValue] = {}
    """CLI configuration layered over the user's own, never written into it: Codex ``-c``
    overrides (nested tables become dotted keys), OpenCode configuration (passed as
    ``OPENCODE_CONFIG_CONTENT``), Gemini CLI and Qwen Code settings (merged into the settings
    file the gateway points them at)."""
    project_config: bool = False
    """Whether the agent may load the workspace's own agent configuration (its MCP servers,
    hooks, plugins, settings, permission rules and instruction files, such as Claude Code's
    ``.claude/settings.json`` and ``.mcp.json``). Off by default: a repository is untrusted
    input, and each CLI is kept from it as docs/security.md says, per agent. ``acp:copilot``
    and ``acp:codex``, which the gateway has no switch for, are unavailable until it is true;
    Gemini CLI and Qwen Code refuse ``auto_edits`` and ``allow_all`` sessions (422) while it
    is false."""
    idle_timeout_s: float = Field(default=600.0, gt=0)
    """A live CLI process with no turn for this long is closed; the next turn resumes it."""
    turn_idle_timeout_s: float = Field(default=900.0, gt=0)
    """A running turn with no CLI output for this long fails as ``idle_timeout`` (time
    waiting for an approval does not count)."""
    startup_timeout_s: float = Field(default=60.0, gt=0)
    """How long the CLI has to answer its start-up handshake."""
    interrupt_grace_s: float = Field(default=10.0, gt=0)
    """After an interrupt, how long the CLI has to end the turn before its process is stopped."""
    stop_grace_s: float = Field(default=5.0, gt=0)
    """How long a closing CLI gets after stdin EOF before SIGTERM."""
    sandbox: SandboxMode | None = None
    """``bwrap`` or ``none`` for this provider alone, over ``sandbox.mode``."""
    credential_check: bool = True
    """Whether the gateway looks for the CLI's credential (an API key variable, a login file,
    a token, a custom model endpoint) and holds the provider back as ``needs_login`` when it
    finds none. Off for a credential the gateway cannot see (a keychain, a cloud SDK's own
    files, a model provider in the CLI's own config file): the provider counts as logged in,
    and ``doctor`` says its credential was not checked."""
