"""Builds one provider object per enabled provider, once, at start-up."""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from app.process.runner import ProcessRunner
from app.providers.base import Provider
from app.providers.catalog import described, executable
from app.providers.descriptor import BuildContext
from app.providers.sandboxing import LoginFiles, sandbox_for
from app.settings import Settings


def build_providers(
    settings: Settings, runner: ProcessRunner, *, parent_env: Mapping[str, str] | None = None
) -> dict[str, Provider]:
    """The enabled providers of ``settings`` (as ``catalog.resolve`` returns them) by name.

    A CLI that cannot be found does not stop the gateway: its provider is still built (its
    turns fail as ``cli_missing``) and the registry reports it unavailable with the fix.
    """
    providers: dict[str, Provider] = {}
    # Every provider checks a session's workspace again right where a CLI gets it: inside a
    # workspace root, or (a session's worktree) the worktrees root.
    roots = (*settings.workspaces.roots, settings.worktrees_root)
    for name, provider_settings in settings.providers.items():
        if not provider_settings.enabled:
            continue
        command = executable(name, settings)
        descriptor = described(name)
        login = LoginFiles(
            files=descriptor.credentials.login_files,
            config_dirs=descriptor.credentials.config_dirs,
        )
        providers[name] = descriptor.build(
            BuildContext(
                name=name,
                settings=provider_settings,
                executable=shutil.which(command) or command,
                runner=runner,
                parent_env=parent_env,
                retry=settings.retry,
                limits=settings.limits,
                workspace_roots=roots,
                sandbox=sandbox_for(name, settings, login),
                state_dir=settings.storage.data_dir,
            )
        )
    return providers
