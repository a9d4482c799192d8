"""Builds one provider object per enabled provider, once, at start-up."""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from app.providers.base import Provider
from app.providers.claude.provider import ClaudeCodeProvider
from app.runtime.process import ProcessRunner
from app.settings import Settings


def build_providers(
    settings: Settings, runner: ProcessRunner, *, parent_env: Mapping[str, str] | None = None
) -> dict[str, Provider]:
    """The enabled providers by name.

    A CLI that cannot be found does not stop the gateway: its provider is still built (its
    turns fail as ``cli_missing``) and the registry reports it unavailable with the fix.
    """
    providers: dict[str, Provider] = {}
    for name, provider_settings in settings.providers.items():
        if not provider_settings.enabled:
            continue
        executable = settings.provider_executable(name)
        resolved = shutil.which(executable) or executable
        match name:
            case "claude_code":
                providers[name] = ClaudeCodeProvider(
                    settings=provider_settings,
                    executable=resolved,
                    runner=runner,
                    parent_env=parent_env,
                )
            case _:  # a known name this build cannot drive yet: reported, not built
                continue
    return providers
