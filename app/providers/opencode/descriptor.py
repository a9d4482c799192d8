"""OpenCode as the catalog knows it: one shared ``opencode serve`` driven over HTTP and SSE."""

from __future__ import annotations

from app.providers.base import Provider
from app.providers.descriptor import BuildContext, Credentials, ProviderDescriptor
from app.providers.opencode.config import passthrough_for
from app.providers.opencode.provider import OpenCodeProvider
from app.providers.opencode.session import NAME


def _build(context: BuildContext) -> Provider:
    # OpenCode 1.18.33 has no retry knob (5 retries, honouring retry-after).
    return OpenCodeProvider(
        settings=context.settings,
        executable=context.executable,
        runner=context.runner,
        parent_env=context.parent_env,
        workspace_roots=context.workspace_roots,
    )


DESCRIPTOR = ProviderDescriptor(
    name=NAME,
    command="opencode",
    npm_package="opencode-ai",
    capabilities=OpenCodeProvider.capabilities,
    credentials=Credentials(
        variables=("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"),
        login_files=(".local/share/opencode/auth.json",),
        hint="run `opencode auth login`, or configure a provider in providers.opencode.config",
    ),
    passthrough=lambda settings: passthrough_for(settings.model, settings.config),
    build=_build,
)
