"""Claude Code as the catalog knows it: ``claude`` in stream-json mode, one process a session."""

from __future__ import annotations

from app.providers.claude.provider import NAME, PASSTHROUGH_ENV, ClaudeCodeProvider
from app.providers.descriptor import Credentials, ProviderDescriptor
from app.providers.sandboxing import claude_settings_login

DESCRIPTOR = ProviderDescriptor(
    name=NAME,
    command="claude",
    npm_package="@anthropic-ai/claude-code",
    capabilities=ClaudeCodeProvider.capabilities,
    credentials=Credentials(
        variables=(
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
        ),
        login_files=(".claude/.credentials.json",),
        config_dirs={"CLAUDE_CONFIG_DIR": ".claude"},
        endpoint_variables=("ANTHROPIC_BASE_URL",),
        settings_login=claude_settings_login,
        hint="run `claude auth login` as the gateway's user, or set "
        "providers.claude_code.env.ANTHROPIC_API_KEY",
    ),
    passthrough=lambda _settings: PASSTHROUGH_ENV,
    build=ClaudeCodeProvider,
)
