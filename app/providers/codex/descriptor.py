"""Codex as the catalog knows it: one shared ``codex app-server`` speaking JSON-RPC."""

from __future__ import annotations

from app.providers.base import Provider
from app.providers.codex.provider import PASSTHROUGH_ENV, CodexProvider
from app.providers.descriptor import BuildContext, Credentials, ProviderDescriptor


def _build(context: BuildContext) -> Provider:
    return CodexProvider(
        settings=context.settings,
        executable=context.executable,
        runner=context.runner,
        parent_env=context.parent_env,
        retry=context.retry,
        workspace_roots=context.workspace_roots,
    )


DESCRIPTOR = ProviderDescriptor(
    name="codex",
    command="codex",
    npm_package="@openai/codex",
    capabilities=CodexProvider.capabilities,
    credentials=Credentials(
        variables=("OPENAI_API_KEY", "CODEX_API_KEY"),
        login_files=(".codex/auth.json",),
        endpoint_variables=("OPENAI_BASE_URL",),
        hint="run `codex login`, or set providers.codex.env.OPENAI_API_KEY",
    ),
    passthrough=lambda _settings: PASSTHROUGH_ENV,
    build=_build,
)
