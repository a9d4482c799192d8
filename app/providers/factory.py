"""Builds one provider object per enabled provider, once, at start-up."""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from app.providers.base import Provider
from app.providers.claude.provider import ClaudeCodeProvider
from app.runtime.process import ProcessRunner
from app.settings import ConfigError, Settings


def build_providers(
    settings: Settings, runner: ProcessRunner, *, parent_env: Mapping[str, str] | None = None
) -> dict[str, Provider]:
    """The enabled providers by name; a missing executable is a ``ConfigError``."""
    providers: dict[str, Provider] = {}
    for name, provider_settings in settings.providers.items():
        if not provider_settings.enabled:
            continue
        executable = settings.provider_executable(name)
        resolved = shutil.which(executable)
        if resolved is None:
            raise ConfigError(
                f"providers.{name}: executable {executable!r} was not found; run `make setup` "
                f"to install the pinned CLIs, set providers.{name}.executable, or set "
                f"providers.{name}.enabled = false"
            )
        match name:
            case "claude_code":
                providers[name] = ClaudeCodeProvider(
                    settings=provider_settings,
                    executable=resolved,
                    runner=runner,
                    parent_env=parent_env,
                )
            case _:  # pragma: no cover - settings validation allows known names only
                raise ConfigError(f"provider {name!r} is not supported by this build")
    return providers
