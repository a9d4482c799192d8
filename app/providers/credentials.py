"""Whether a provider's CLI has what it needs to reach a model, looked for where the CLI looks.

One detector for the providers' health (``needs_login``: app/providers/registry.py) and for
``doctor``. It takes the environment the CLI will run with (``providers.<name>.env`` over the
variables of the gateway's own environment that the provider passes through) and looks, in
this order, for:

1. a credential variable of the CLI's (``ANTHROPIC_API_KEY``, ``CODEX_API_KEY``…) set there;
2. a login in a settings file the CLI reads (Claude Code's ``settings.json`` ``env``, where the
   container's entrypoint puts the key);
3. a login file the CLI keeps (``~/.claude/.credentials.json``, ``$CODEX_HOME/auth.json``…)
   under that environment's ``HOME``, or under the config directory a variable moves. A
   sandboxed session runs in a home of its own, but the sandbox shows it exactly these files
   of the operator's (app/providers/sandboxing.py), so they are looked for there either way;
4. a key in ``providers.<name>.config`` (an OpenCode provider's ``apiKey``);
5. a custom model endpoint (``ANTHROPIC_BASE_URL``, a ``base_url`` in the config).

Nothing found: the provider needs a login, and ``fix`` says how to give it one. An agent the
gateway knows no credential of (an operator's own ``acp:<name>``) is not checked, nor is a
provider with ``credential_check = false`` (its CLI finds a credential the gateway cannot
see). Only names and paths are ever put in a message, never a value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import JsonValue

from app.process.childspec import child_environment
from app.providers.catalog import described
from app.providers.descriptor import Credentials
from app.providers.sandboxing import login_source
from app.settings import ProviderSettings

CredentialForm = Literal["variable", "settings", "login_file", "config", "endpoint"]
"""How a credential was found (the numbered list above)."""

_KEY_NAMES = frozenset({"apikey", "api_key"})
_URL_NAMES = frozenset({"base_url", "baseurl"})
_SHOWN_VARIABLES = 4
"""How many variable names a message lists before it says how many more."""


@dataclass(frozen=True, kw_only=True)
class Credential:
    """What the detector found for one provider."""

    found: bool
    """A credential is present, or the gateway cannot tell (``checked`` false)."""
    form: CredentialForm | None
    """How it was found; None when none was, or when not checked."""
    where: str
    """Found: which variable or file (``ANTHROPIC_API_KEY in providers.claude_code.env``).
    Not found: where the detector looked. Never a value."""
    fix: str
    """What gives the CLI a credential (a login command, a variable to set)."""
    checked: bool = True
    """False for an agent whose credentials the gateway does not know."""

    @property
    def problem(self) -> str | None:
        """Why the provider needs a login, phrased as what to do; None when it does not."""
        if self.found:
            return None
        return f"no credential found ({self.where}): {self.fix}"


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """A custom model endpoint the CLI is pointed at, and what points it there."""

    url: str
    source: str


def cli_environment(
    name: str, settings: ProviderSettings, parent_env: Mapping[str, str]
) -> dict[str, str]:
    """The variables the CLI of provider ``name`` gets: the allowed and passed-through ones of
    ``parent_env`` (the gateway's environment), then ``providers.<name>.env``."""
    passthrough = described(name).passthrough(settings)
    return child_environment(parent_env, passthrough=passthrough, overlay=settings.env)


def find_credential(
    name: str, settings: ProviderSettings, parent_env: Mapping[str, str]
) -> Credential:
    """Whether provider ``name``'s CLI, run under ``settings`` by a gateway whose environment
    is ``parent_env``, finds a credential or a model endpoint (see the module's docstring)."""
    credentials = described(name).credentials
    if not settings.credential_check:
        return Credential(
            found=True,
            form=None,
            where=f"not checked (providers.{name}.credential_check = false)",
            fix=credentials.hint,
            checked=False,
        )
    if not credentials.variables and not credentials.login_files:
        return Credential(
            found=True,
            form=None,
            where="not checked: the gateway does not know where this agent keeps its credentials",
            fix=credentials.hint,
            checked=False,
        )
    env = cli_environment(name, settings, parent_env)
    for variable in credentials.variables:
        if env.get(variable):
            source = (
                f"providers.{name}.env"
                if settings.env.get(variable)
                else "the gateway's environment"
            )
            return _found("variable", f"{variable} in {source}", credentials)
    if credentials.settings_login is not None:
        found = credentials.settings_login(env)
        if found is not None:
            return _found("settings", found, credentials)
    logins = [login_source(f, env, credentials.config_dirs) for f in credentials.login_files]
    unreadable: list[Path] = []
    for path in (p for p in logins if p is not None):
        if _has_content(path):
            if os.access(path, os.R_OK):
                return _found("login_file", f"login file {path}", credentials)
            unreadable.append(path)
    keys = list(_keys(settings.config))
    if keys:
        return _found("config", f"{keys[0]} in providers.{name}.config", credentials)
    found_endpoints = endpoints(name, settings, parent_env)
    if found_endpoints:
        first = found_endpoints[0]
        return _found("endpoint", f"a custom model endpoint ({first.source})", credentials)
    return Credential(
        found=False,
        form=None,
        where=_looked(credentials, [p for p in logins if p is not None]),
        fix=_fix(name, credentials, env, parent_env, unreadable),
    )


def endpoints(
    name: str, settings: ProviderSettings, parent_env: Mapping[str, str]
) -> list[Endpoint]:
    """The custom model endpoints the CLI of provider ``name`` is pointed at: its endpoint
    variables, and ``base_url`` / ``baseURL`` values in ``providers.<name>.config`` and in the
    JSON of its config variables."""
    credentials = described(name).credentials
    env = cli_environment(name, settings, parent_env)
    found = [
        Endpoint(url=env[variable], source=variable)
        for variable in credentials.endpoint_variables
        if env.get(variable)
    ]
    found.extend(
        Endpoint(url=url, source=f"providers.{name}.config") for url in _urls(settings.config)
    )
    for variable in credentials.config_variables:
        found.extend(Endpoint(url=url, source=variable) for url in _urls(_json(env.get(variable))))
    return found


def _found(form: CredentialForm, where: str, credentials: Credentials) -> Credential:
    return Credential(found=True, form=form, where=where, fix=credentials.hint)


def _has_content(path: Path) -> bool:
    """A file (followed through links) that holds something: a sandbox leaves empty ones."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def _looked(credentials: Credentials, logins: list[Path]) -> str:
    names = list(credentials.variables)
    if len(names) > _SHOWN_VARIABLES + 1:
        shown = f"{', '.join(names[:_SHOWN_VARIABLES])} or {len(names) - _SHOWN_VARIABLES} more"
    else:
        shown = ", ".join(names)
    parts = []
    if len(names) == 1:
        parts.append(f"{shown} not set")
    elif names:
        parts.append(f"none of {shown} set")
    if logins:
        parts.append(f"no file at {' or '.join(str(p) for p in logins)}")
    return "; ".join(parts)


def _fix(
    name: str,
    credentials: Credentials,
    env: Mapping[str, str],
    parent_env: Mapping[str, str],
    unreadable: list[Path],
) -> str:
    """The descriptor's hint, after what the operator most likely got wrong: a key set in the
    gateway's environment that this CLI is not given, a login file it cannot read."""
    notes: list[str] = []
    if unreadable:
        paths = ", ".join(str(p) for p in unreadable)
        notes.append(f"{paths} cannot be read by the gateway's user")
    withheld = [v for v in credentials.variables if parent_env.get(v) and not env.get(v)]
    if withheld:
        notes.append(
            f"{', '.join(withheld)} is set in the gateway's environment but not passed to "
            f"{name}: set it in providers.{name}.env"
        )
    return "; ".join([*notes, credentials.hint])


def _keys(value: JsonValue, path: str = "") -> Iterator[str]:
    """Dotted paths of the non-empty ``apiKey`` / ``api_key`` values in a config overlay."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else key
            if key.lower() in _KEY_NAMES and isinstance(item, str) and item:
                yield here
            else:
                yield from _keys(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _keys(item, f"{path}[{index}]")


def _urls(value: JsonValue) -> Iterable[str]:
    """Values of ``base_url`` / ``baseURL`` keys anywhere in a CLI config overlay."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key.lower() in _URL_NAMES and isinstance(item, str) and item:
                yield item
            else:
                yield from _urls(item)
    elif isinstance(value, list):
        for item in value:
            yield from _urls(item)


def _json(text: str | None) -> JsonValue:
    if not text:
        return None
    try:
        parsed: JsonValue = json.loads(text)
    except ValueError:
        return None
    return parsed
