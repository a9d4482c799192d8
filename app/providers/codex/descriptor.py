"""Codex as the catalog knows it: one shared ``codex app-server`` speaking JSON-RPC."""

from __future__ import annotations

from app.providers.codex.provider import PASSTHROUGH_ENV, CodexProvider
from app.providers.descriptor import Credentials, ProviderDescriptor

DESCRIPTOR = ProviderDescriptor(
    name="codex",
    command="codex",
    npm_package="@openai/codex",
    capabilities=CodexProvider.capabilities,
    credentials=Credentials(
        variables=("OPENAI_API_KEY", "CODEX_API_KEY"),
        login_files=(".codex/auth.json",),
        config_dirs={"CODEX_HOME": ".codex"},
        endpoint_variables=("OPENAI_BASE_URL",),
        hint="run `codex login`, or set providers.codex.env.OPENAI_API_KEY",
    ),
    passthrough=lambda _settings: PASSTHROUGH_ENV,
    build=CodexProvider,
)
