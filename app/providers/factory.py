"""Builds one provider object per enabled provider, once, at start-up."""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from app.process.runner import ProcessRunner
from app.providers.base import Provider
from app.providers.claude.provider import PASSTHROUGH_ENV as CLAUDE_PASSTHROUGH
from app.providers.claude.provider import ClaudeCodeProvider
from app.providers.codex.provider import PASSTHROUGH_ENV as CODEX_PASSTHROUGH
from app.providers.codex.provider import CodexProvider
from app.providers.opencode.config import passthrough_for
from app.providers.opencode.provider import OpenCodeProvider
from app.redaction import SECRET_NAME
from app.settings import Settings

PROVIDER_CLASSES: dict[str, type[ClaudeCodeProvider | CodexProvider | OpenCodeProvider]] = {
    "claude_code": ClaudeCodeProvider,
    "codex": CodexProvider,
    "opencode": OpenCodeProvider,
}


def cli_secrets(settings: Settings, parent_env: Mapping[str, str]) -> list[str]:
    """The secret values the enabled CLIs get from the gateway's own environment (their
    credential variables), to be kept out of events and logs like the configured ones."""
    passthrough: dict[str, tuple[str, ...]] = {
        "claude_code": CLAUDE_PASSTHROUGH,
        "codex": CODEX_PASSTHROUGH,
        "opencode": passthrough_for(
            settings.providers["opencode"].model, settings.providers["opencode"].config
        ),
    }
    return [
        parent_env[variable]
        for name, provider_settings in settings.providers.items()
        if provider_settings.enabled
        for variable in passthrough[name]
        if SECRET_NAME.search(variable) and parent_env.get(variable)
    ]


def build_providers(
    settings: Settings, runner: ProcessRunner, *, parent_env: Mapping[str, str] | None = None
) -> dict[str, Provider]:
    """The enabled providers by name.

    A CLI that cannot be found does not stop the gateway: its provider is still built (its
    turns fail as ``cli_missing``) and the registry reports it unavailable with the fix.
    """
    providers: dict[str, Provider] = {}
    # Every provider checks a session's workspace again right where a CLI gets it.
    roots = tuple(settings.workspaces.roots)
    for name, provider_settings in settings.providers.items():
        if not provider_settings.enabled:
            continue
        executable = settings.provider_executable(name)
        provider_class = PROVIDER_CLASSES[name]
        found = shutil.which(executable) or executable
        if issubclass(provider_class, ClaudeCodeProvider):
            providers[name] = provider_class(
                settings=provider_settings,
                executable=found,
                runner=runner,
                parent_env=parent_env,
                retry=settings.retry,
                limits=settings.limits,
                workspace_roots=roots,
            )
        elif issubclass(provider_class, OpenCodeProvider):
            # OpenCode 1.18.33 has no retry knob (5 retries, honouring retry-after).
            providers[name] = provider_class(
                settings=provider_settings,
                executable=found,
                runner=runner,
                parent_env=parent_env,
                workspace_roots=roots,
            )
        else:
            providers[name] = provider_class(
                settings=provider_settings,
                executable=found,
                runner=runner,
                parent_env=parent_env,
                retry=settings.retry,
                workspace_roots=roots,
            )
    return providers
