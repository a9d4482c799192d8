"""OpenCode as the catalog knows it: one shared ``opencode serve`` driven over HTTP and SSE."""

from __future__ import annotations

from app.providers.descriptor import Credentials, ProviderDescriptor
from app.providers.opencode.config import PASSTHROUGH_ENV, passthrough_for
from app.providers.opencode.provider import OpenCodeProvider
from app.providers.opencode.session import NAME

DESCRIPTOR = ProviderDescriptor(
    name=NAME,
    command="opencode",
    npm_package="opencode-ai",
    capabilities=OpenCodeProvider.capabilities,
    credentials=Credentials(
        # Every model provider's key it may be given (AWS_REGION alone is no credential).
        variables=tuple(v for v in PASSTHROUGH_ENV if v != "AWS_REGION"),
        login_files=(".local/share/opencode/auth.json",),
        config_dirs={"XDG_DATA_HOME": ".local/share"},
        hint="run `opencode auth login`, or configure a provider in providers.opencode.config",
    ),
    passthrough=lambda settings: passthrough_for(settings.model, settings.config),
    build=OpenCodeProvider,
)
