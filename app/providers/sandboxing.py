"""Each provider's sandbox: which mode it runs in and why, and what one session's agent sees.

``sandbox_for`` decides a provider's mode once, at start-up, from ``sandbox.mode`` and its own
``providers.<name>.sandbox``: ``auto`` is ``bwrap`` where a probe sandbox starts, else
``none`` (with the reason); an explicit ``bwrap`` that cannot start makes the provider
unavailable rather than run it unconfined.

``Sandbox.confine`` builds what one session's agent process gets: its workspace, a home of
its own under ``homes_dir`` (created here, kept for the session's later turns, removed with
the session), the operator's login files for that CLI bound read-only into it (never the
operator's whole home), the agent's installation read-only, and the environment rewritten to
point into that home. Nothing of the operator's user-level CLI config (hooks, plugins, MCP
servers, settings) reaches it: only the gateway's own, given on the command line.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.process.sandbox import SYSTEM_PATHS, Confinement, probe
from app.settings import SandboxMode, Settings
from app.store.files import SQLITE_COMPANIONS

log = logging.getLogger(__name__)

XDG_HOMES: Mapping[str, str] = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_CACHE_HOME": ".cache",
    "XDG_STATE_HOME": ".local/state",
}
"""Every XDG base directory, inside the session's home."""

INSIDE_ENV: Mapping[str, str] = {
    # Claude Code (and the ACP adapter that runs it) refuses `allow_all` as root unless it
    # knows it runs inside bubblewrap (seen in 2.1.332).
    "CLAUDE_CODE_BUBBLEWRAP": "1",
}
"""Set for every sandboxed agent: it runs in a sandbox."""


@dataclass(frozen=True, kw_only=True)
class SandboxStatus:
    """The mode a provider's agents run in, why, and whether they can run at all."""

    mode: SandboxMode
    reason: str
    problem: str | None = None
    """Set when the provider cannot start an agent (``bwrap`` asked for but not working)."""


@dataclass(frozen=True, kw_only=True)
class LoginFiles:
    """Where a CLI keeps its login: files relative to ``HOME``, and the variables that move
    its config directory (``CODEX_HOME`` → ``.codex``)."""

    files: tuple[str, ...] = ()
    config_dirs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Sandbox:
    """One provider's sandbox. ``status.mode == "none"``: ``confine`` changes nothing."""

    status: SandboxStatus
    bwrap: str = "bwrap"
    homes_dir: Path | None = None
    read_only: tuple[Path, ...] = ()
    read_write: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    login: LoginFiles = LoginFiles()

    @property
    def on(self) -> bool:
        return self.status.mode == "bwrap"

    def home(self, session_id: str) -> Path:
        """The session's own home (not created)."""
        assert self.homes_dir is not None
        return self.homes_dir / session_id

    def confine(
        self,
        *,
        session_id: str,
        workspace: Path | None,
        executable: str,
        env: Mapping[str, str],
        git_dir: Path | None = None,
    ) -> tuple[Confinement | None, dict[str, str]]:
        """The confinement of one agent process of ``session_id`` and the environment it
        runs with (``env`` with ``HOME`` and the CLI's config directories moved into the
        session's home); ``(None, env)`` when the sandbox is off. ``git_dir``: the Git
        directory of the repository the session's worktree belongs to, writable but for its
        configuration and hooks."""
        if not self.on:
            return None, dict(env)
        home = self.home(session_id)
        _private_dir(home)
        inside = dict(env)
        inside["HOME"] = str(home)
        inside["TMPDIR"] = "/tmp"  # noqa: S108 - the sandbox's private /tmp
        inside.update(INSIDE_ENV)
        for variable, relative in XDG_HOMES.items():
            inside[variable] = str(home / relative)
        files: list[tuple[Path, Path]] = []
        for relative in self.login.files:
            source = login_source(relative, env, self.login.config_dirs)
            if source is not None and source.is_file():
                target = home / relative
                _private_dir(target.parent)
                target.touch(mode=0o600, exist_ok=True)
                files.append((source.resolve(), target))
        for variable, relative in self.login.config_dirs.items():
            inside[variable] = str(home / relative)
            _private_dir(home / relative)
        visible = () if workspace is None else (workspace,)
        git = () if git_dir is None else (git_dir,)
        confinement = Confinement(
            bwrap=self.bwrap,
            read_only=(*installation(executable, env), *self.read_only),
            writable=(*self.read_write, *git),
            guarded=tuple(p for d in git for p in guarded_git_paths(d)),
            home=home,
            exposed=(
                *self._exposed(env),
                *_named_files(
                    inside, shown=(home, *visible, *git, *self.read_write, *self.read_only)
                ),
            ),
            files=tuple(files),
            workspace=workspace,
            hidden=self.hidden,
            as_user=inside_uid(),
        )
        return confinement, inside

    def _exposed(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """``PATH`` directories the gateway keeps in a hidden directory for the agent (Codex's
        sandbox helper): shown read-only, alone."""
        found: list[Path] = []
        for entry in env.get("PATH", "").split(os.pathsep):
            path = Path(entry)
            if path.is_absolute() and path.is_dir():
                real = _real(path)
                if any(real.is_relative_to(top) for top in self.hidden):
                    found.append(real)
        return tuple(found)

    def forget(self, session_id: str) -> None:
        """Remove the home of ``session_id`` (a health probe's, once it is done)."""
        if self.homes_dir is not None:
            shutil.rmtree(self.home(session_id), ignore_errors=True)


GUARDED_GIT_FILES = ("config", "config.worktree", "hooks")
"""What of a repository's Git directory a sandboxed agent may not change: git runs what they
name (hooks, filters, a file-system monitor) in every later ``git`` there, outside the
sandbox."""


def guarded_git_paths(git_dir: Path) -> tuple[Path, ...]:
    """The parts of ``git_dir`` shown read-only over its writable bind (those that exist)."""
    return tuple(git_dir / name for name in GUARDED_GIT_FILES if (git_dir / name).exists())


def _named_files(env: Mapping[str, str], *, shown: tuple[Path, ...]) -> tuple[Path, ...]:
    """Files the agent's environment names by absolute path (a settings layer the gateway
    wrote for it, a credentials file the operator gave it), not already under ``shown``
    (its home, the operator's extra paths, where they stay writable if they are): shown
    read-only at that path."""
    found: list[Path] = []
    for value in env.values():
        if not value.startswith("/") or os.pathsep in value or "\n" in value:
            continue
        path = Path(value)
        if path.is_file() and not any(path.is_relative_to(top) for top in shown):
            found.append(path)
    return tuple(dict.fromkeys(found))


def forget_homes(settings: Settings, session_ids: Iterable[str]) -> int:
    """Remove the CLI homes of sessions whose threads retention forgot; how many there were."""
    removed = 0
    for session_id in session_ids:
        home = settings.homes_dir / Path(session_id).name
        if home.is_dir():
            shutil.rmtree(home, ignore_errors=True)
            removed += 1
    return removed


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def login_source(relative: str, env: Mapping[str, str], dirs: Mapping[str, str]) -> Path | None:
    """Where the operator keeps the login file ``relative`` (to ``HOME``): under the config
    directory a variable moved, else under ``HOME``."""
    for variable, directory in dirs.items():
        moved = env.get(variable)
        if moved and Path(relative).is_relative_to(directory):
            return Path(moved) / Path(relative).relative_to(directory)
    home = env.get("HOME")
    return Path(home) / relative if home else None


def installation(executable: str, env: Mapping[str, str]) -> tuple[Path, ...]:
    """What running ``executable`` needs to read besides the system: the ``node_modules``
    tree it lies in (else its own directory), and the interpreter its ``#!`` line names when
    that lies outside the system (a Node.js or Python of its own)."""
    found = shutil.which(executable, path=env.get("PATH", os.defpath))
    if found is None:
        return ()
    real = Path(os.path.realpath(found))
    paths: list[Path] = []
    # Both as named and as resolved: the command is run by the name it was given, and
    # Node.js loads a script's modules from its resolved path.
    for path in (Path(os.path.abspath(found)), real):
        parts = path.parts
        if "node_modules" in parts:
            paths.append(Path(*parts[: parts.index("node_modules") + 1]))
        else:
            paths.append(path.parent)
    named = _interpreter(real, env)
    if named is not None:
        # <prefix>/bin/<interpreter>, as named and as resolved: the whole prefix (its
        # libraries live beside it), unless it is the system's.
        for interpreter in (named, Path(os.path.realpath(named))):
            prefix = interpreter.parent.parent
            if not _system(interpreter) and len(prefix.parts) > 1:  # never all of /
                paths.append(prefix)
    return tuple(dict.fromkeys(paths))


def _interpreter(script: Path, env: Mapping[str, str]) -> Path | None:
    try:
        with script.open("rb") as file:
            first = file.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    program = words[0]
    if Path(program).name == "env":
        named = [w for w in words[1:] if not w.startswith("-")]
        if not named:
            return None
        found = shutil.which(named[0], path=env.get("PATH", os.defpath))
        if found is None:
            return None
        program = found
    return Path(os.path.abspath(program))


def _system(path: Path) -> bool:
    """Whether ``path`` lies in the system the sandbox shows anyway (as named: ``/bin/sh``,
    or resolved: ``/usr/bin/sh``)."""
    return any(
        path.is_relative_to(top) or path.is_relative_to(os.path.realpath(top))
        for top in SYSTEM_PATHS
    )


SANDBOX_UID = 1000
"""Who a sandboxed agent is inside its user namespace when the gateway runs as root (it is
still the gateway's user to the files it writes)."""


def inside_uid() -> int | None:
    return SANDBOX_UID if os.geteuid() == 0 else None


@functools.cache
def bwrap_problem(bwrap: str, as_user: int | None) -> str | None:
    """Why ``bwrap`` cannot sandbox here (probed once per gateway process), or None."""
    resolved = shutil.which(bwrap)
    if resolved is None:
        return f"{bwrap} is not installed (Debian: apt-get install bubblewrap)"
    return probe(resolved, as_user=as_user)


def status_of(name: str, settings: Settings) -> SandboxStatus:
    """The mode provider ``name`` runs in under ``settings``, and why."""
    section = settings.providers.get(name)
    own = section.sandbox if section is not None else None
    asked = own or settings.sandbox.mode
    where = f"providers.{name}.sandbox" if own else "sandbox.mode"
    if asked == "none":
        return SandboxStatus(mode="none", reason=f"{where} = none")
    problem = bwrap_problem(settings.sandbox.bwrap, inside_uid())
    if problem is not None and asked == "auto":
        reason = f"no sandbox: {problem}; agents run with the gateway's own view of the machine"
        return SandboxStatus(mode="none", reason=reason)
    if problem is not None:
        return SandboxStatus(mode="bwrap", reason=f"{where} = bwrap", problem=problem)
    return SandboxStatus(mode="bwrap", reason=f"bubblewrap ({where} = {asked})")


def sandbox_for(name: str, settings: Settings, login: LoginFiles) -> Sandbox:
    """Provider ``name``'s sandbox under ``settings`` (``status_of`` says its mode)."""
    status = status_of(name, settings)
    if status.mode == "none":
        return Sandbox(status=status)
    return Sandbox(
        status=status,
        bwrap=shutil.which(settings.sandbox.bwrap) or settings.sandbox.bwrap,
        homes_dir=settings.homes_dir,
        read_only=tuple(_real(p) for p in settings.sandbox.read_only),
        read_write=tuple(_real(p) for p in settings.sandbox.read_write),
        hidden=hidden_paths(settings),
        login=login,
    )


def hidden_paths(settings: Settings) -> tuple[Path, ...]:
    """The gateway's own files, which no agent may see: its configuration file, its data
    directory (database, token, logs, every session's home and workspace record), the homes,
    the sessions' worktrees, the workspace records and a SQLite file kept elsewhere, with its
    write-ahead log and shared-memory file. (A session's own home and worktree show through:
    ``Confinement``.)"""
    paths = [
        settings.storage.data_dir,
        settings.homes_dir,
        settings.worktrees_root,
        settings.snapshots_dir,
    ]
    if settings.config_file is not None:
        paths.append(settings.config_file)
    url = settings.storage.database_url
    if url.startswith("sqlite"):
        database = Path(url.partition(":///")[2])
        # Its write-ahead log holds the latest events until a checkpoint.
        paths += [database, *(Path(f"{database}{end}") for end in SQLITE_COMPANIONS)]
    return tuple(dict.fromkeys(_real(p) for p in paths))


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


SETTINGS_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
"""The variables of the operator's ``settings.json`` ``env`` that are a login."""


def claude_settings_file(env: Mapping[str, str]) -> Path | None:
    """The operator's Claude Code ``settings.json`` under ``env``: in ``$CLAUDE_CONFIG_DIR``,
    else in ``~/.claude`` (None without either variable)."""
    directory = env.get("CLAUDE_CONFIG_DIR") or (
        str(Path(env["HOME"]) / ".claude") if env.get("HOME") else None
    )
    return None if directory is None else Path(directory) / "settings.json"


def settings_credentials(env: Mapping[str, str]) -> dict[str, str]:
    """The login variables in the ``env`` of the operator's Claude Code ``settings.json``
    (``claude_settings_file``); ``{}`` when there is none or it is not readable JSON."""
    path = claude_settings_file(env)
    if path is None:
        return {}
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    found = settings.get("env") if isinstance(settings, dict) else None
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if k in SETTINGS_CREDENTIALS and isinstance(v, str)}


def claude_settings_login(env: Mapping[str, str]) -> str | None:
    """Which login variables the operator's Claude Code ``settings.json`` sets, and where
    (never their values); None when it sets none."""
    found = [name for name, value in settings_credentials(env).items() if value]
    if not found:
        return None
    return f"{', '.join(found)} in the env of {claude_settings_file(env)}"
