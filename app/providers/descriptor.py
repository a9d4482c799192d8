"""What a provider is, as the rest of the gateway needs to know it: one ``ProviderDescriptor``.

Each provider package defines its descriptor next to its provider class; ``app.providers.catalog``
registers them in one map, which settings resolution, the factory, the health registry,
``doctor``, ``/v1/providers``, the API contract and the provider contract tests read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.process.runner import ProcessRunner
from app.providers.base import Capabilities, Provider
from app.providers.sandboxing import Sandbox, SandboxStatus
from app.settings import LimitsSettings, ProviderSettings, RetrySettings


@dataclass(frozen=True, kw_only=True)
class BuildContext:
    """Everything a provider is built from: every provider class takes this one value."""

    name: str
    settings: ProviderSettings
    executable: str
    """The CLI, resolved on ``PATH`` when it can be (else as configured)."""
    runner: ProcessRunner
    parent_env: Mapping[str, str] | None = None
    """The gateway's own environment, which the CLIs' pass-through variables come from
    (None: ``os.environ``)."""
    retry: RetrySettings = field(default_factory=RetrySettings)
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    sandbox: Sandbox = field(
        default_factory=lambda: Sandbox(status=SandboxStatus(mode="none", reason="not asked"))
    )
    """What each of the provider's agent processes sees (app/providers/sandboxing.py)."""
    state_dir: Path | None = None
    """The gateway's data directory, for files a provider keeps for its CLI (Codex's sandbox
    helper link); None: it keeps none."""
    workspace_roots: tuple[Path, ...] | None = None
    """Every spawn (and every thread a shared server starts) checks that the session's
    workspace is still its directory inside one of them; None checks only that it is a
    directory."""


@dataclass(frozen=True, kw_only=True)
class Credentials:
    """Where the CLI finds what lets it reach a model, and what to say when nothing is there:
    read by the credential detector (app/providers/credentials.py) for the providers' health
    and ``doctor``, and by the sandbox, which shows each session the operator's login files."""

    variables: tuple[str, ...]
    """Any of these set in the CLI's environment counts: in ``providers.<name>.env``, or in
    the gateway's own environment when the provider passes it through."""
    login_files: tuple[str, ...] = ()
    """A login the CLI keeps, relative to ``HOME``."""
    config_dirs: Mapping[str, str] = field(default_factory=dict)
    """Variables that move the CLI's config directory, with where it is relative to ``HOME``
    by default (``CODEX_HOME`` → ``.codex``); a sandboxed session gets its own."""
    endpoint_variables: tuple[str, ...] = ()
    """Variables that point the CLI at a model endpoint (a custom endpoint counts as a
    credential; ``doctor`` checks that it answers)."""
    config_variables: tuple[str, ...] = ()
    """Variables holding the CLI's configuration as JSON (``CODEX_CONFIG``), searched for a
    model endpoint like ``providers.<name>.config``."""
    settings_login: Callable[[Mapping[str, str]], str | None] | None = None
    """Another file the CLI reads a login from, given the environment it runs with (Claude
    Code's ``settings.json``): which variables were found where (never their values), or
    None."""
    hint: str
    """What to do when none is found."""


@dataclass(frozen=True, kw_only=True)
class ProviderDescriptor:
    """One provider: its name, its CLI, what it can do and how to build it."""

    name: str
    family: bool = False
    """``name`` names a family of providers driven alike (``acp``): each member is
    ``<name>:<member>`` (``acp:gemini``), present only when ``providers`` configures it."""
    command: str
    """The CLI's command name: ``agents/node_modules/.bin/<command>``, else on ``PATH``."""
    pinned: str | None = None
    """The pinned CLI when it is not ``.bin/<command>``: a path under ``agents/node_modules``."""
    npm_package: str | None
    """The package pinned in ``agents/package.json`` (its version is the provider's pin)."""
    cli_version: str | None = None
    """The version the pinned package's CLI reports, when it is not the package's own (the
    CodeBuddy CLI inside ``@tencent-ai/agent-sdk``); kept in step with that pin."""
    capabilities: Capabilities
    credentials: Credentials
    passthrough: Callable[[ProviderSettings], tuple[str, ...]]
    """The variables of the gateway's own environment the CLI may get (credentials,
    endpoints) under these settings; everything else is withheld."""
    build: Callable[[BuildContext], Provider]
