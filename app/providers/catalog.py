"""The providers this gateway can drive, in one map, and what follows from it.

``CATALOG`` holds one ``ProviderDescriptor`` per provider (each defined in its package's
``descriptor.py``). Adding a provider is one package and one entry here. Settings resolution
(which names exist, their defaults), the factory, the health registry, ``doctor``,
``/v1/providers``, the API contract and the provider contract tests read this map.

Settings stay below the providers (``app.settings`` knows no provider by name): ``resolve``
turns the settings as read into the settings the gateway runs with, every catalogued provider
present, and refuses names the catalog does not know.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from app.providers.acp.descriptor import FAMILY as ACP
from app.providers.acp.descriptor import MEMBERS as ACP_MEMBERS
from app.providers.claude.descriptor import DESCRIPTOR as CLAUDE_CODE
from app.providers.codex.descriptor import DESCRIPTOR as CODEX
from app.providers.descriptor import ProviderDescriptor
from app.providers.opencode.descriptor import DESCRIPTOR as OPENCODE
from app.providers.sandboxing import settings_credentials
from app.redaction import SECRET_NAME
from app.settings import PINNED_MODULES, PROJECT_ROOT, ConfigError, ProviderSettings, Settings

CATALOG: Mapping[str, ProviderDescriptor] = {
    d.name: d for d in (CLAUDE_CODE, CODEX, OPENCODE, *ACP_MEMBERS, ACP)
}
"""Every provider (or family of providers) by name, in the order the gateway lists them: the
built-in members of a family have entries of their own (``acp:gemini``: its recipe, pin and
credential hints); the family's entry (``acp``) drives the members an operator adds. Members
of either kind are present only as configured (``[providers."acp:gemini"]``)."""


def descriptor(
    name: str, catalog: Mapping[str, ProviderDescriptor] = CATALOG
) -> ProviderDescriptor | None:
    """What drives provider ``name``: its own descriptor, or its family's for a member
    (``acp:gemini``); None for a name the catalog does not know."""
    own = catalog.get(name)
    if own is not None:
        return None if own.family else own
    family, colon, member = name.partition(":")
    found = catalog.get(family) if colon and member else None
    return found if found is not None and found.family else None


def described(name: str) -> ProviderDescriptor:
    """The descriptor of a provider the settings were resolved with (``resolve``)."""
    found = descriptor(name)
    if found is None:
        raise KeyError(name)
    return found


def known_names(catalog: Mapping[str, ProviderDescriptor] = CATALOG) -> str:
    """The names a configuration may use, for messages: ``claude_code, …, acp:<name>``."""
    return ", ".join(f"{n}:<name>" if d.family else n for n, d in catalog.items())


def present_by_default(catalog: Mapping[str, ProviderDescriptor] = CATALOG) -> list[str]:
    """The providers a gateway has without a section of their own. A family's members, built
    in or not, are present only as configured: an agent the operator never set up is not
    listed, probed or selectable."""
    return [name for name, d in catalog.items() if not d.family and ":" not in name]


PACKAGE_JSON = PROJECT_ROOT / "agents" / "package.json"


def resolve(settings: Settings, catalog: Mapping[str, ProviderDescriptor] = CATALOG) -> Settings:
    """The settings the gateway runs with: every catalogued provider present (its configured
    section, else the defaults; a family's members, built in or not, only as configured), each
    provider and selection name one the catalog knows.

    Raises ``ConfigError`` naming what is unknown and what is known. Idempotent.
    """
    known = known_names(catalog)
    for name, section in settings.providers.items():
        found = descriptor(name, catalog)
        if found is None:
            raise ConfigError(
                f"invalid configuration: unknown provider {name!r} in providers; "
                f"this gateway knows: {known}"
            )
        if found.family and not section.command:
            raise ConfigError(
                f"invalid configuration: providers.{name!r} needs command = [...], the agent's "
                f"command line (the gateway has a recipe only for "
                f"{', '.join(n for n, d in catalog.items() if not d.family and ':' in n)})"
            )
        if section.command and not (found.family or name.startswith(f"{ACP.name}:")):
            raise ConfigError(
                f"invalid configuration: providers.{name}.command is only for "
                f"{ACP.name}:<name> agents; use executable and extra_args"
            )
    defaults = {name: ProviderSettings() for name in present_by_default(catalog)}
    providers = defaults | settings.providers
    selection = settings.selection
    named = [selection.default, *selection.fallback_chain]
    for chain in selection.scenarios.values():
        named.extend(chain)
    for name in named:
        if name not in providers:
            raise ConfigError(
                f"invalid configuration: selection names provider {name!r}, which this gateway "
                f"does not know; known providers: {known}"
            )
    return settings.model_copy(update={"providers": providers})


def executable(name: str, settings: Settings) -> str:
    """The CLI of provider ``name``: the configured one, else the pinned one from agents/,
    else its command name (found on ``PATH``)."""
    section = settings.providers.get(name)
    if section is not None and section.executable:
        return section.executable
    if section is not None and section.command:
        return section.command[0]
    found = described(name)
    pinned = PINNED_MODULES / (found.pinned or f".bin/{found.command}")
    return str(pinned) if pinned.exists() else found.command


@cache
def pinned_versions(package_json: Path = PACKAGE_JSON) -> dict[str, str]:
    """The CLI versions pinned in agents/package.json, by provider name."""
    try:
        dependencies = json.loads(package_json.read_text())["dependencies"]
    except (OSError, ValueError, KeyError):
        return {}
    return {
        name: d.cli_version or dependencies[d.npm_package]
        for name, d in CATALOG.items()
        if d.npm_package in dependencies
    }


def cli_secrets(settings: Settings, parent_env: Mapping[str, str]) -> list[str]:
    """The secret values the enabled CLIs get from the gateway's own environment (their
    credential variables), and the key a sandboxed Claude Code (or Claude adapter) takes from
    the operator's settings.json, to be kept out of events and logs like the configured ones."""
    found = [
        parent_env[variable]
        for name, provider in settings.providers.items()
        if provider.enabled and descriptor(name) is not None
        for variable in described(name).passthrough(provider)
        if SECRET_NAME.search(variable) and parent_env.get(variable)
    ]
    for name in (CLAUDE_CODE.name, "acp:claude"):
        claude = settings.providers.get(name)
        if claude is not None and claude.enabled:
            found.extend(settings_credentials({**parent_env, **claude.env}).values())
    return found
