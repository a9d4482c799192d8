"""Put the credentials and the gateway token given in the environment where their readers look.

Run by ``docker/entrypoint.sh`` as the unprivileged user, before the server starts. Secrets
arrive only in the environment (never on the command line) and are never printed: messages
name the variable and the file, nothing else. Each file is merged (every other key kept, so a
login or settings already on the volume survive), replaced atomically with mode 600, and left
alone when it already holds the same values. Standard library only: it runs with any Python 3.

Where each variable goes (formats checked against the pinned CLIs):

- ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, ``CLAUDE_CODE_OAUTH_TOKEN`` → the ``env`` of
  ``$CLAUDE_CONFIG_DIR/settings.json`` (Claude Code applies it at start; the gateway runs it
  with ``--setting-sources user``, which includes this file, and gives a sandboxed Claude Code,
  whose session home has no settings.json, these variables alone from it).
- ``OPENAI_API_KEY`` → ``$CODEX_HOME/auth.json`` as ``codex login --with-api-key`` writes it
  (``{"auth_mode": "apikey", "OPENAI_API_KEY": …}``).
- ``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``OPENROUTER_API_KEY`` → OpenCode's
  ``$XDG_DATA_HOME/opencode/auth.json`` as ``{"<provider>": {"type": "api", "key": …}}``.
- ``GATEWAY_TOKEN`` → ``$GATEWAY_STORAGE__DATA_DIR/token``, the gateway's admin token file.

With ``--require-token`` it also insists that the server will have a token: ``GATEWAY_TOKEN``,
``GATEWAY_SERVER__TOKEN`` or an existing token file. Exit status 0 when done, 2 with a message
saying what to fix otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

PREFIX = "entrypoint"
MIN_TOKEN_CHARS = 32
"""The gateway ignores a token file holding less (app/api/security.py)."""

CLAUDE_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
CODEX_KEY = "OPENAI_API_KEY"
OPENCODE_PROVIDERS = {
    "ANTHROPIC_API_KEY": "anthropic",
    "OPENAI_API_KEY": "openai",
    "OPENROUTER_API_KEY": "openrouter",
}
INJECTED = tuple(dict.fromkeys((*CLAUDE_ENV, CODEX_KEY, *OPENCODE_PROVIDERS, "GATEWAY_TOKEN")))
"""Every variable this helper consumes; the entrypoint removes them before the server starts."""

HOW_TO_SET_IT = (
    "set GATEWAY_TOKEN to a random string of at least 32 characters, e.g. the output of "
    "`openssl rand -base64 32` or "
    "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
)


Update = Callable[[dict[str, object], Mapping[str, str]], list[str]]
"""Changes one CLI's file (a JSON object) for the environment; returns the variables used."""


class Refused(Exception):
    """The environment or a file on the volume cannot be used; the message says what to fix."""


class Paths:
    """The files to write, from the same variables the CLIs and the gateway read."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        home = Path(environ.get("AGENT_HOME") or environ.get("HOME") or "/home/agent")
        claude = Path(environ.get("CLAUDE_CONFIG_DIR") or home / ".claude")
        codex = Path(environ.get("CODEX_HOME") or home / ".codex")
        data_home = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        data_dir = Path(environ.get("GATEWAY_STORAGE__DATA_DIR") or "/data")
        self.claude_settings = claude / "settings.json"
        self.codex_auth = codex / "auth.json"
        self.opencode_auth = data_home / "opencode" / "auth.json"
        self.token = data_dir / "token"


def given(environ: Mapping[str, str], name: str) -> str | None:
    """The variable's value, or None when it is unset or empty (compose's ``${VAR:-}``)."""
    value = environ.get(name, "")
    return value or None


def claude_update(settings: dict[str, object], environ: Mapping[str, str]) -> list[str]:
    """Set Claude Code's credential variables in ``settings["env"]``; return the names set."""
    values = {name: v for name in CLAUDE_ENV if (v := given(environ, name)) is not None}
    if not values:
        return []
    env = settings.setdefault("env", {})
    if not isinstance(env, dict):
        raise Refused('its "env" is not a JSON object')
    env.update(values)
    return list(values)


def codex_update(auth: dict[str, object], environ: Mapping[str, str]) -> list[str]:
    """Switch Codex to the API key, as ``codex login --with-api-key`` does."""
    key = given(environ, CODEX_KEY)
    if key is None:
        return []
    auth["auth_mode"] = "apikey"
    auth[CODEX_KEY] = key
    return [CODEX_KEY]


def opencode_update(auth: dict[str, object], environ: Mapping[str, str]) -> list[str]:
    """Give each OpenCode provider with a key in the environment an API-key credential."""
    names = []
    for name, provider in OPENCODE_PROVIDERS.items():
        key = given(environ, name)
        if key is not None:
            auth[provider] = {"type": "api", "key": key}
            names.append(name)
    return names


def read_object(path: Path) -> dict[str, object]:
    """The JSON object in ``path``; ``{}`` when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise Refused(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Refused(f"{path} is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(data, dict):
        raise Refused(f"{path} does not hold a JSON object; fix or remove it")
    return data


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, mode 600 (directories created mode 700)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)  # left by a start that crashed
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(temporary, flags, 0o600)
    except OSError as exc:
        raise Refused(f"cannot write {path}: {exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise Refused(f"cannot write {path}: {exc}") from None


def merge_into(path: Path, update: Update, environ: Mapping[str, str]) -> list[str]:
    """Apply ``update`` to the JSON object in ``path``; write it back if that changed it.

    Returns the variables written (none when the file already held them).
    """
    data = read_object(path)
    before = json.dumps(data, sort_keys=True)
    try:
        names = update(data, environ)
    except Refused as exc:
        raise Refused(f"{path}: {exc}; fix or remove it") from None
    if not names:
        return []
    if json.dumps(data, sort_keys=True) == before:
        os.chmod(path, 0o600)
        return []
    write_private(path, json.dumps(data, indent=2) + "\n")
    return names


def check_token(token: str) -> None:
    if len(token) < MIN_TOKEN_CHARS:
        raise Refused(f"GATEWAY_TOKEN has {len(token)} characters, fewer than 32: {HOW_TO_SET_IT}")
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise Refused(
            "GATEWAY_TOKEN may hold only printable ASCII characters without spaces: "
            + HOW_TO_SET_IT
        )


def place_token(path: Path, environ: Mapping[str, str], *, require: bool) -> bool:
    """Write ``GATEWAY_TOKEN`` into the token file; with ``require``, insist on some token.

    Returns whether the file was written.
    """
    token = given(environ, "GATEWAY_TOKEN")
    if token is not None:
        check_token(token)
        try:
            current = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            current = None
        if current == token:
            os.chmod(path, 0o600)
            return False
        write_private(path, token + "\n")
        return True
    if not require or given(environ, "GATEWAY_SERVER__TOKEN") is not None:
        return False
    try:
        current = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise Refused(
            "the gateway listens beyond loopback in a container and needs a token, and "
            f"{path} does not exist yet: {HOW_TO_SET_IT} (or create the file with "
            "`agent-gateway token rotate` in the container, which prints the new token)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Refused(f"cannot read the token file {path}: {exc}") from None
    if len(current) < MIN_TOKEN_CHARS:
        raise Refused(f"the token file {path} holds fewer than 32 characters: {HOW_TO_SET_IT}")
    return False


def run(environ: Mapping[str, str], *, require_token: bool) -> list[str]:
    """Write everything the environment gives; return one line per file written."""
    paths = Paths(environ)
    report = []
    updates: tuple[tuple[Path, Update], ...] = (
        (paths.claude_settings, claude_update),
        (paths.codex_auth, codex_update),
        (paths.opencode_auth, opencode_update),
    )
    for path, update in updates:
        names = merge_into(path, update, environ)
        if names:
            report.append(f"{', '.join(names)} → {path}")
    if place_token(paths.token, environ, require=require_token):
        report.append(f"GATEWAY_TOKEN → {paths.token}")
    return report


def main(argv: list[str]) -> int:
    """``credentials.py [--require-token]``; the entrypoint runs it with ``python3 -I -S``."""
    if argv not in ([], ["--require-token"]):
        sys.stderr.write(f"{PREFIX}: usage: credentials.py [--require-token]\n")
        return 2
    try:
        report = run(os.environ, require_token=argv == ["--require-token"])
    except Refused as exc:
        sys.stderr.write(f"{PREFIX}: {exc}\n")
        return 2
    for line in report:
        sys.stderr.write(f"{PREFIX}: credentials: {line}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
