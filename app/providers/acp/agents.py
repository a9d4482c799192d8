"""The Agent Client Protocol agents the gateway knows by name: one ``AgentRecipe`` each.

A recipe says how to start the agent quietly (telemetry, update checks and other traffic of its
own off), which of its session modes asks before running tools, and where its credentials come
from. Operators add agents that are not here with ``[providers."acp:<name>"] command = [...]``;
those run with the ``GENERIC`` recipe (the agent's own default mode, no settings layered).

The switches come from ``reference/acp-agents.md``; each was checked with the pinned version on
loopback (no name resolved, nothing sent but to the model endpoint).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from app.events import ApprovalMode
from app.providers.descriptor import Credentials
from app.providers.sandboxing import claude_settings_login


@dataclass(frozen=True, kw_only=True)
class SettingsLayer:
    """A settings file the agent reads from the path in ``variable``, above the user's own
    settings: the gateway writes ``content`` (with ``providers.<name>.config`` merged over it)
    to a file of its own and never into the user's."""

    variable: str
    content: Mapping[str, JsonValue]


@dataclass(frozen=True, kw_only=True)
class ProjectConfigSwitch:
    """How the agent is kept from loading the workspace's own configuration (its MCP servers,
    hooks, settings, instruction files), and let in again when ``providers.<name>.
    project_config`` is true. Both sides are set over ``providers.<name>.env`` and ``config``:
    the operator turns it on with ``project_config``, not with a variable."""

    off_env: Mapping[str, str] = field(default_factory=dict)
    on_env: Mapping[str, str] = field(default_factory=dict)
    off_settings: Mapping[str, JsonValue] = field(default_factory=dict)
    """Merged into the recipe's settings layer."""
    on_settings: Mapping[str, JsonValue] = field(default_factory=dict)
    off_files: Mapping[str, Mapping[str, JsonValue]] = field(default_factory=dict)
    """Variable → content of a file the gateway writes (its own, never the user's) and
    points the variable at."""
    off_args: tuple[str, ...] = ()
    """Arguments after the agent's own (and before ``extra_args``)."""
    on_args: tuple[str, ...] = ()
    off_meta: Mapping[str, JsonValue] = field(default_factory=dict)
    """The ``_meta`` of every ``session/new``, ``session/load`` and ``session/resume``, for an
    agent that takes its options there (the Claude adapter)."""
    on_meta: Mapping[str, JsonValue] = field(default_factory=dict)

    untrusted_refuses: frozenset[ApprovalMode] = frozenset()
    """The approval modes the agent refuses in a folder it does not trust: with the switch
    off, a session in one of them is refused at creation (422), not at its first turn."""

    def env(self, allowed: bool) -> Mapping[str, str]:
        return self.on_env if allowed else self.off_env

    def meta(self, allowed: bool) -> Mapping[str, JsonValue]:
        return self.on_meta if allowed else self.off_meta

    def args(self, allowed: bool) -> tuple[str, ...]:
        return self.on_args if allowed else self.off_args

    def settings(self, allowed: bool) -> Mapping[str, JsonValue]:
        return self.on_settings if allowed else self.off_settings


ThreadStore = Literal["claude_transcripts"]
"""Where an agent keeps its threads: ``claude_transcripts`` is Claude Code's
``~/.claude/projects/<project>/<thread>.jsonl`` (app/providers/transcripts.py)."""


@dataclass(frozen=True, kw_only=True)
class AgentRecipe:
    """How to run one ACP agent."""

    member: str
    """The name after ``acp:``."""
    title: str
    command: str
    """The command name on ``PATH`` when the pinned copy is absent."""
    program: str | None = None
    """The pinned executable, relative to ``agents/node_modules`` (``.bin/<command>`` when
    None)."""
    args: tuple[str, ...] = ()
    npm_package: str | None = None
    cli_version: str | None = None
    """What the pinned package's CLI reports as its version, when that is not the package's."""
    node22: bool = False
    """Declares Node.js >= 22: run with the pinned Node 22 (``agents/node_modules/.bin/node``)
    first on ``PATH``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Fixed switches: telemetry, update checks, relaunches off."""
    modes: Mapping[ApprovalMode, str] = field(default_factory=dict)
    """The agent's session mode for each approval mode; ``ask`` must be one that asks before
    running any tool that changes something. A mode the agent does not offer is never set."""
    mode_env: Mapping[ApprovalMode, Mapping[str, str]] = field(default_factory=dict)
    """Variables that select the approval behaviour, for agents without session modes."""
    settings: SettingsLayer | None = None
    project_config: ProjectConfigSwitch | None = None
    """None: the gateway knows no way to keep this agent from loading the workspace's own
    configuration, and says so (``GET /v1/providers``, docs/agents/)."""
    loads_workspace_config: str | None = None
    """Set for an agent known to load the workspace's own configuration whatever it is told
    (why, for the operator): it runs only once ``providers.<name>.project_config`` is true,
    and is unavailable until then."""
    passthrough: tuple[str, ...] = ()
    """Variables of the gateway's own environment the agent may get (credentials, endpoints)."""
    claude_settings_login: bool = False
    """Runs Claude Code: in the sandbox, whose home has no ``settings.json``, it gets the login
    variables of the operator's (where the container's entrypoint keeps the key) and nothing
    else of it, as the native provider does."""
    credentials: Credentials
    replays_after_load: bool = False
    """Answers ``session/load`` before its history replay is over (the replay keeps arriving):
    the gateway waits for the replay to go quiet before the next prompt."""
    prompt_gap_after_cancel_s: float = 0.0
    """CodeBuddy answers a prompt sent within a few milliseconds of a cancelled turn with
    ``cancelled`` at once, without calling its model; the next prompt waits this long."""
    exits_on_eof: bool = True
    """Ends when its stdin closes; CodeBuddy does not, and is stopped with SIGTERM at once."""
    chooses_model: bool = True
    """Offers a model config option over ACP, so a session's ``model`` can be set
    (app/providers/acp/options.py); an agent without one runs the model it is configured
    with, and a session naming a model never goes to it."""
    forks: ThreadStore | None = None
    """The pinned version answers ``session/fork`` (checked against the stub), and this is
    where it keeps its threads, so that a fork's session, in a home of its own when
    sandboxed, finds the parent's: a fork at a session's latest turn is then the agent's own
    (``Provider.fork_thread``). None: a fork is handed the conversation instead."""
    load_minute_guard: bool = False
    """Gemini CLI 0.61: a ``session/load`` in the same UTC minute as the thread's creation
    overwrites the thread's record (its file name holds the minute) and fails; the gateway
    waits for the next minute first."""


_QUIET_NODE = {"NO_UPDATE_NOTIFIER": "1", "NODE_NO_WARNINGS": "1"}
_CLAUDE_SWITCHES = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
_GEMINI_STYLE_SETTINGS: Mapping[str, JsonValue] = {
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}
_COPILOT_MODE = "https://agentclientprotocol.com/protocol/session-modes#"

GEMINI = AgentRecipe(
    member="gemini",
    title="Gemini CLI",
    command="gemini",
    args=("--acp",),
    npm_package="@google/gemini-cli",
    env={**_QUIET_NODE, "GEMINI_CLI_NO_RELAUNCH": "true"},
    modes={"ask": "default", "auto_edits": "autoEdit", "allow_all": "yolo", "read_only": "plan"},
    settings=SettingsLayer(
        variable="GEMINI_CLI_SYSTEM_SETTINGS_PATH", content=_GEMINI_STYLE_SETTINGS
    ),
    # Gemini CLI 0.61 loads a workspace's .gemini/settings.json (mcpServers, hooks, ...),
    # its .env, GEMINI.md, skills and policies only in a trusted folder. Trust comes from
    # the user's trustedFolders.json or `security.folderTrust.enabled: false`, both the
    # user's; GEMINI_CLI_TRUST_WORKSPACE decides before either (checkPathTrust). Untrusted,
    # it also refuses the `autoEdit` and `yolo` modes ("Cannot enable privileged approval
    # modes in an untrusted folder").
    project_config=ProjectConfigSwitch(
        off_env={"GEMINI_CLI_TRUST_WORKSPACE": "false"},
        on_env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
        untrusted_refuses=frozenset({"auto_edits", "allow_all"}),
    ),
    passthrough=(
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ),
    credentials=Credentials(
        variables=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),
        login_files=(".gemini/oauth_creds.json",),
        endpoint_variables=("GOOGLE_GEMINI_BASE_URL",),
        hint='set providers."acp:gemini".env.GEMINI_API_KEY, or run `gemini` once as the '
        "gateway's user and log in with Google",
    ),
    replays_after_load=True,
    # Gemini CLI 0.61 offers no model config option over ACP (its session/new answer).
    chooses_model=False,
    load_minute_guard=True,
)

COPILOT = AgentRecipe(
    member="copilot",
    title="GitHub Copilot CLI",
    command="copilot",
    # The native binary: the npm loader (bin/copilot) runs it with spawnSync, which adds a node
    # process and does not pass signals on.
    program="@github/copilot-linux-x64/copilot",
    args=("--acp", "--stdio"),
    npm_package="@github/copilot",
    env={"COPILOT_AUTO_UPDATE": "false"},
    modes={
        "ask": _COPILOT_MODE + "agent",
        "read_only": _COPILOT_MODE + "plan",
        "allow_all": _COPILOT_MODE + "autopilot",
    },
    passthrough=("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_HOME"),
    credentials=Credentials(
        variables=("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_PROVIDER_API_KEY"),
        login_files=(".copilot/config.json",),
        config_dirs={"COPILOT_HOME": ".copilot"},
        endpoint_variables=("COPILOT_PROVIDER_BASE_URL",),
        hint="run `copilot login` as the gateway's user, or set "
        'providers."acp:copilot".env.COPILOT_GITHUB_TOKEN (or a COPILOT_PROVIDER_* model)',
    ),
    # Copilot CLI 1.0.102 offers no model config option over ACP (its session/new answer).
    chooses_model=False,
    # Over ACP it runs a workspace's .github/hooks and loads its instructions and skills in
    # any folder, and starts its .mcp.json servers in a folder its config.json trusts.
    # Observed unchanged by --no-custom-instructions, `disableAllHooks` in its user settings
    # (in COPILOT_HOME or --config-dir) and COPILOT_TEST_MANAGED_SETTINGS_FILE_PATH; only the
    # machine-wide /etc/github-copilot/managed-settings.json (allowManagedHooksOnly,
    # allowManagedMcpServersOnly) held hooks and servers back.
    loads_workspace_config=(
        "Copilot CLI runs a workspace's .github/hooks and loads its instructions and skills "
        "in any folder (and its .mcp.json servers in a folder it trusts), and nothing the "
        "gateway can give one process turns that off"
    ),
)

QWEN = AgentRecipe(
    member="qwen",
    title="Qwen Code",
    command="qwen",
    args=("--acp", "--approval-mode", "default"),
    npm_package="@qwen-code/qwen-code",
    node22=True,
    env=_QUIET_NODE,
    modes={"ask": "default", "auto_edits": "auto-edit", "allow_all": "yolo", "read_only": "plan"},
    settings=SettingsLayer(
        variable="QWEN_CODE_SYSTEM_SETTINGS_PATH",
        content={
            **_GEMINI_STYLE_SETTINGS,
            "general": {"enableAutoUpdate": False},
            # A "[SUGGESTION MODE]" model call after every turn; nothing would show it.
            "ui": {"enableFollowupSuggestions": False},
        },
    ),
    # Qwen Code 0.24.4 has folder trust off by default: every workspace is trusted, and its
    # .qwen/settings.json hooks ran under the gateway (observed). With folder trust on (the
    # system layer outranks the user's settings) and a trusted-folders file of the gateway's
    # own that trusts nothing, the workspace's settings (hooks, mcpServers), its skills' hooks
    # and its .qwen/loop.md are left out whatever the user's ~/.qwen/trustedFolders.json says.
    project_config=ProjectConfigSwitch(
        off_settings={"security": {"folderTrust": {"enabled": True}}},
        off_files={"QWEN_CODE_TRUSTED_FOLDERS_PATH": {}},
        on_settings={"security": {"folderTrust": {"enabled": False}}},
        # Refused untrusted: `auto-edit` (seen) and `yolo`, as in Gemini CLI.
        untrusted_refuses=frozenset({"auto_edits", "allow_all"}),
    ),
    passthrough=("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "DASHSCOPE_API_KEY"),
    credentials=Credentials(
        variables=("OPENAI_API_KEY", "DASHSCOPE_API_KEY"),
        login_files=(".qwen/oauth_creds.json",),
        endpoint_variables=("OPENAI_BASE_URL",),
        hint='set providers."acp:qwen".env.OPENAI_API_KEY (and OPENAI_BASE_URL), or run '
        "`qwen` once as the gateway's user and log in",
    ),
)

CODEBUDDY = AgentRecipe(
    member="codebuddy",
    title="CodeBuddy Code",
    command="codebuddy",
    # The documented @tencent-ai/codebuddy-code is not on the registry; the SDK ships the CLI.
    program="@tencent-ai/agent-sdk/cli/bin/codebuddy",
    args=("--acp",),
    npm_package="@tencent-ai/agent-sdk",
    cli_version="2.117.0",  # the CLI in @tencent-ai/agent-sdk 0.3.201
    env={
        **_QUIET_NODE,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CODEBUDDY_SKIP_BUILTIN_MARKETPLACE": "1",
    },
    exits_on_eof=False,
    prompt_gap_after_cancel_s=1.0,
    modes={
        "ask": "default",
        "auto_edits": "acceptEdits",
        "allow_all": "bypassPermissions",
        "read_only": "plan",
    },
    # CodeBuddy Code 2.117.0 asks for no folder trust in ACP mode: by default a workspace's
    # .codebuddy/settings*.json hooks ran and its .mcp.json server started (with
    # `enableAllProjectMcpServers` in those settings). With `--setting-sources user` none of
    # that ran, even where the user's own settings approve project MCP servers: the project
    # and local settings (hooks, permissions, env, plugins, MCP approvals) are left out;
    # `--strict-mcp-config` also leaves out every .mcp.json whatever approves it.
    # CODEBUDDY.md, .codebuddy/rules and skills still reach the prompt (no switch for them).
    project_config=ProjectConfigSwitch(
        off_args=("--setting-sources", "user", "--strict-mcp-config")
    ),
    passthrough=("CODEBUDDY_API_KEY", "CODEBUDDY_BASE_URL", "CODEBUDDY_MODEL"),
    credentials=Credentials(
        variables=("CODEBUDDY_API_KEY",),
        login_files=(".codebuddy/models.json",),
        hint='set providers."acp:codebuddy".env.CODEBUDDY_API_KEY, or run `codebuddy` once as '
        "the gateway's user and log in",
    ),
)

CLAUDE = AgentRecipe(
    member="claude",
    title="Claude Agent (ACP adapter)",
    command="claude-agent-acp",
    npm_package="@agentclientprotocol/claude-agent-acp",
    node22=True,
    env={**_QUIET_NODE, **_CLAUDE_SWITCHES},
    # Its default mode is "auto": Claude decides alone, no permission request at all.
    modes={"ask": "default", "auto_edits": "acceptEdits", "read_only": "plan"},
    # The adapter 0.101.0 asks the Claude Agent SDK for the user, project and local setting
    # sources, and lets `_meta.claudeCode.options` replace its options: what the native
    # provider passes as `--setting-sources user --strict-mcp-config` (no workspace
    # .claude/settings*.json hooks or permissions, .mcp.json servers or CLAUDE.md). The
    # adapter's own settings watcher still reads the workspace's model and default mode; the
    # gateway sets the mode itself after session/new.
    project_config=ProjectConfigSwitch(
        off_meta={"claudeCode": {"options": {"settingSources": ["user"], "strictMcpConfig": True}}},
    ),
    passthrough=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
    claude_settings_login=True,
    # The adapter 0.101.0 forks a whole thread (`sessionCapabilities.fork`; no cut point):
    # Claude Code's own fork of the transcript, under the new session's id.
    forks="claude_transcripts",
    credentials=Credentials(
        variables=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
        login_files=(".claude/.credentials.json",),
        config_dirs={"CLAUDE_CONFIG_DIR": ".claude"},
        endpoint_variables=("ANTHROPIC_BASE_URL",),
        settings_login=claude_settings_login,
        hint="run `claude auth login` as the gateway's user, or set "
        'providers."acp:claude".env.ANTHROPIC_API_KEY',
    ),
)

CODEX = AgentRecipe(
    member="codex",
    title="Codex (ACP adapter)",
    command="codex-acp",
    npm_package="@agentclientprotocol/codex-acp",
    env={**_QUIET_NODE, "NO_BROWSER": "1"},
    # "agent" (its default) has a model review escalations; "read-only" asks a human for
    # anything that leaves the sandbox.
    modes={"ask": "read-only", "read_only": "read-only", "auto_edits": "workspace-write"},
    # The adapter 2.6.0 starts every Codex thread with its workspace marked trusted
    # (createSessionConfig: `projects.<cwd>.trust_level = "trusted"`, over whatever
    # CODEX_CONFIG says), so Codex loads the workspace's .codex/config.toml: a stdio MCP
    # server it defines started inside the gateway's sandbox (observed).
    loads_workspace_config=(
        "the Codex ACP adapter marks every session's workspace trusted, so Codex loads the "
        "workspace's .codex/config.toml (MCP servers, exec-policy rules, model providers) "
        "and the gateway cannot turn that off"
    ),
    passthrough=("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_HOME"),
    credentials=Credentials(
        variables=("OPENAI_API_KEY", "CODEX_API_KEY"),
        login_files=(".codex/auth.json",),
        config_dirs={"CODEX_HOME": ".codex"},
        # The adapter layers CODEX_CONFIG over Codex's config: a model provider of its own.
        config_variables=("CODEX_CONFIG",),
        hint="run `codex login` as the gateway's user, or set "
        'providers."acp:codex".env.OPENAI_API_KEY',
    ),
)

OPENCODE = AgentRecipe(
    member="opencode",
    title="OpenCode (ACP)",
    command="opencode",
    args=("acp",),
    npm_package="opencode-ai",
    env={
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    },
    # The native provider's switches (app/providers/opencode/config.py NO_PROJECT_CONFIG_ENV):
    # `opencode acp` loads its config the way `opencode serve` does.
    project_config=ProjectConfigSwitch(
        off_env={"OPENCODE_DISABLE_PROJECT_CONFIG": "1", "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1"}
    ),
    # OpenCode runs bash without asking by default and has no session modes.
    mode_env={
        "ask": {"OPENCODE_PERMISSION": '{"bash":"ask","edit":"ask","webfetch":"ask"}'},
        "auto_edits": {"OPENCODE_PERMISSION": '{"bash":"ask","edit":"allow","webfetch":"ask"}'},
        "allow_all": {"OPENCODE_PERMISSION": '{"bash":"allow","edit":"allow","webfetch":"allow"}'},
        "read_only": {"OPENCODE_PERMISSION": '{"bash":"ask","edit":"deny","webfetch":"ask"}'},
    },
    passthrough=("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "OPENCODE_CONFIG"),
    credentials=Credentials(
        variables=("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"),
        login_files=(".local/share/opencode/auth.json",),
        config_dirs={"XDG_DATA_HOME": ".local/share"},
        hint='run `opencode auth login`, or set a key in providers."acp:opencode".env',
    ),
)

BUILTIN: Mapping[str, AgentRecipe] = {
    r.member: r for r in (GEMINI, COPILOT, QWEN, CODEBUDDY, CLAUDE, CODEX, OPENCODE)
}
"""The agents known by name, in the order the gateway lists them."""

GENERIC = AgentRecipe(
    member="",
    title="ACP agent",
    command="",
    credentials=Credentials(
        variables=(),
        hint='give the agent its credentials in providers."acp:<name>".env',
    ),
)
"""An operator's own agent: its ``command`` comes from the settings."""


def recipe_for(name: str) -> AgentRecipe:
    """The recipe of ``acp:<member>``: the built-in one, else the generic one."""
    member = name.partition(":")[2]
    return BUILTIN.get(member) or dataclasses.replace(GENERIC, member=member, title=name)
