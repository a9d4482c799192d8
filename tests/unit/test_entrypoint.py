"""docker/entrypoint.sh under bash, with the system commands it calls replaced by recording fakes.

The fakes (``id``, ``groupmod``, ``usermod``, ``chown``, ``setpriv``, ``npm``,
``agent-gateway``) sit first on PATH; each appends its pid, name, argv and environment to a
log. ``setpriv`` then execs the rest of its command line, so a command exec'd through it keeps
the entrypoint's pid. ``id`` answers from state files that ``groupmod``/``usermod`` update.
``stat``, ``readlink`` and the credentials helper (docker/credentials.py, under this Python)
are real, on real temporary directories.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
BASH = shutil.which("bash") or "/bin/bash"

AGENT_UID = os.getuid() + 1000  # never the owner of the test's own directories
AGENT_GID = os.getgid() + 1000
GOOD_TOKEN = "tok-" + "T" * 40


def _load_helper() -> ModuleType:
    name = "docker_credentials"
    spec = importlib.util.spec_from_file_location(name, ROOT / "docker" / "credentials.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


CREDENTIALS = _load_helper()

# pid, name and argv of every call; the environment only where a secret must not reach.
RECORD = r"""
{
  printf '%s\037' "$$" "${0##*/}" "$@"
  printf '\035'
  case "${0##*/}" in npm | agent-gateway) env -0 | tr '\0' '\037' ;; esac
  printf '\036'
} >>"$FAKE_STATE/calls"
"""

FAKES = {
    "id": r"""
case "$*" in
  -u) cat "$FAKE_STATE/self_uid" ;;
  -g) cat "$FAKE_STATE/self_gid" ;;
  "-u agent") cat "$FAKE_STATE/agent_uid" ;;
  "-g agent") cat "$FAKE_STATE/agent_gid" ;;
  *) echo "fake id: unexpected arguments: $*" >&2; exit 1 ;;
esac
""",
    "groupmod": r"""
[ "$1 $2 $4" = "-o -g agent" ] || { echo "fake groupmod: unexpected $*" >&2; exit 1; }
echo "$3" >"$FAKE_STATE/agent_gid"
""",
    "usermod": r"""
[ "$1 $2 $4" = "-o -u agent" ] || { echo "fake usermod: unexpected $*" >&2; exit 1; }
echo "$3" >"$FAKE_STATE/agent_uid"
""",
    "chown": "",
    "setpriv": r"""
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do shift; done
shift
exec "$@"
""",
    "npm": r'exit "${FAKE_NPM_EXIT:-0}"',
    "agent-gateway": r"""
case " $* " in
  *" migrate "*) exit "${FAKE_MIGRATE_EXIT:-0}" ;;
esac
""",
}


@dataclass(frozen=True)
class Call:
    pid: int
    name: str
    args: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.name, *self.args)


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    pid: int
    calls: list[Call]

    def named(self, name: str) -> list[Call]:
        return [c for c in self.calls if c.name == name]

    def gateway_commands(self) -> list[tuple[str, ...]]:
        return [c.args for c in self.named("agent-gateway")]

    def through_setpriv(self, call: Call) -> Call:
        """The setpriv call that ran ``call`` (the last one before it that names its argv)."""
        index = self.calls.index(call)
        for before in reversed(self.calls[:index]):
            if before.name == "setpriv" and before.args[-len(call.argv) :] == call.argv:
                return before
        raise AssertionError(f"{call.argv} did not go through setpriv")


def _parse(log: bytes) -> list[Call]:
    calls = []
    for record in log.decode().split("\x1e"):
        if not record:
            continue
        head, _, env_part = record.partition("\x1d")
        pid, name, *args = head.split("\x1f")[:-1]
        env = dict(e.split("=", 1) for e in env_part.split("\x1f") if "=" in e)
        calls.append(Call(int(pid), name, tuple(args), env))
    return calls


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("fake-bin")
    for name, body in FAKES.items():
        path = directory / name
        path.write_text(f"#!{BASH}\n{RECORD}{body}\n")
        path.chmod(0o755)
    (directory / "python3").symlink_to(sys.executable)
    return directory


@dataclass
class Box:
    """One container's worth of directories, the fakes' state, and a way to start it."""

    root: Path
    fake_bin: Path
    env: dict[str, str]

    @property
    def home(self) -> Path:
        return self.root / "home" / "agent"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def cli_prefix(self) -> Path:
        return self.home / ".local" / "lib" / "agent-clis"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def volume_dirs(self) -> list[Path]:
        return [
            self.home / ".claude",
            self.home / ".codex",
            self.home / ".config" / "opencode",
            self.home / ".local" / "share" / "opencode",
            self.cli_prefix,
            self.data,
        ]

    def set_ids(self, *, self_ids: tuple[int, int], agent_ids: tuple[int, int]) -> None:
        for name, value in zip(
            ("self_uid", "self_gid", "agent_uid", "agent_gid"), (*self_ids, *agent_ids), strict=True
        ):
            (self.state / name).write_text(f"{value}\n")

    def start(self, *args: str, **env: str) -> Run:
        (self.state / "calls").write_bytes(b"")
        process = subprocess.Popen(
            [BASH, str(ENTRYPOINT), *args],
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stdout, stderr = process.communicate(timeout=30)
        calls = _parse((self.state / "calls").read_bytes())
        return Run(process.returncode, stdout, stderr, process.pid, calls)


@pytest.fixture
def box(tmp_path: Path, fake_bin: Path) -> Box:
    made = Box(root=tmp_path, fake_bin=fake_bin, env={})
    for directory in [*made.volume_dirs(), made.workspace, made.state]:
        directory.mkdir(parents=True, exist_ok=True)
    made.set_ids(self_ids=(0, 0), agent_ids=(AGENT_UID, AGENT_GID))
    made.env = {
        "PATH": f"{fake_bin}:/usr/local/bin:/usr/bin:/bin",
        "FAKE_STATE": str(made.state),
        "AGENT_HOME": str(made.home),
        "GATEWAY_STORAGE__DATA_DIR": str(made.data),
        "GATEWAY_WORKSPACES__ROOTS": json.dumps([str(made.workspace)]),
        "GATEWAY_TOKEN": GOOD_TOKEN,
    }
    return made


def _final(run: Run) -> Call:
    """The command the entrypoint exec'd: the last call, in the entrypoint's own process."""
    assert run.returncode == 0, run.stderr
    last = run.calls[-1]
    assert last.pid == run.pid, "the final command was not exec'd by the entrypoint"
    return last


def assert_exec_as_agent(run: Run, argv: Sequence[str], ids: tuple[int, int]) -> None:
    final = _final(run)
    assert final.argv == tuple(argv)
    setpriv = run.through_setpriv(final)
    assert setpriv.pid == run.pid
    assert setpriv.args == (f"--reuid={ids[0]}", f"--regid={ids[1]}", "--init-groups", "--", *argv)


# --- start as root: the privilege drop and the order of things ------------------------------


def test_as_root_it_migrates_then_execs_the_server_as_the_agent_user(box: Box) -> None:
    run = box.start("agent-gateway", "serve")

    assert_exec_as_agent(run, ["agent-gateway", "serve"], (AGENT_UID, AGENT_GID))
    assert run.gateway_commands() == [("migrate",), ("serve",)]
    migrate = run.named("agent-gateway")[0]
    assert migrate.pid != run.pid  # run and waited for, not exec'd
    assert run.through_setpriv(migrate).args[:3] == (
        f"--reuid={AGENT_UID}",
        f"--regid={AGENT_GID}",
        "--init-groups",
    )
    assert not run.named("usermod")
    assert not run.named("groupmod")
    assert run.named("agent-gateway")[-1].env["HOME"] == str(box.home)


def test_no_arguments_means_serve(box: Box) -> None:
    run = box.start()
    assert_exec_as_agent(run, ["agent-gateway", "serve"], (AGENT_UID, AGENT_GID))


def test_migrate_gets_the_options_given_before_serve(box: Box) -> None:
    run = box.start("agent-gateway", "--config", "/etc/gw.toml", "serve", "--port", "9000")
    assert run.gateway_commands() == [
        ("--config", "/etc/gw.toml", "migrate"),
        ("--config", "/etc/gw.toml", "serve", "--port", "9000"),
    ]
    _final(run)


def test_a_failed_migration_stops_start_up(box: Box) -> None:
    run = box.start("agent-gateway", "serve", FAKE_MIGRATE_EXIT="3")
    assert run.returncode != 0
    assert "migrate failed" in run.stderr
    assert run.gateway_commands() == [("migrate",)]


def test_another_command_runs_as_the_agent_without_token_or_migration(box: Box) -> None:
    del box.env["GATEWAY_TOKEN"]
    run = box.start("agent-gateway", "doctor")
    assert_exec_as_agent(run, ["agent-gateway", "doctor"], (AGENT_UID, AGENT_GID))
    assert run.gateway_commands() == [("doctor",)]


# --- PUID / PGID -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("puid", "pgid", "usermod", "groupmod"),
    [
        (None, None, None, None),
        (str(AGENT_UID), str(AGENT_GID), None, None),
        ("4321", None, "4321", None),
        (None, "5432", None, "5432"),
        ("4321", "5432", "4321", "5432"),
    ],
    ids=["not-given", "equal", "uid-only", "gid-only", "both"],
)
def test_the_agent_is_remapped_only_to_ids_that_are_given_and_differ(
    box: Box, puid: str | None, pgid: str | None, usermod: str | None, groupmod: str | None
) -> None:
    ids = {k: v for k, v in {"PUID": puid, "PGID": pgid}.items() if v is not None}
    run = box.start("agent-gateway", "serve", **ids)

    assert [c.args for c in run.named("usermod")] == (
        [("-o", "-u", usermod, "agent")] if usermod else []
    )
    assert [c.args for c in run.named("groupmod")] == (
        [("-o", "-g", groupmod, "agent")] if groupmod else []
    )
    expected = (int(usermod or AGENT_UID), int(groupmod or AGENT_GID))
    assert_exec_as_agent(run, ["agent-gateway", "serve"], expected)
    for chown in run.named("chown"):  # the volumes go to the new ids
        assert chown.args[-2] == f"{expected[0]}:{expected[1]}"


@pytest.mark.parametrize("value", ["abc", "-1", "1000 ", "0"])
def test_a_bad_or_root_puid_stops_start_up_before_any_change(box: Box, value: str) -> None:
    run = box.start("agent-gateway", "serve", PUID=value)
    assert run.returncode != 0
    assert "PUID" in run.stderr
    assert not run.named("usermod")
    assert not run.named("chown")
    assert not run.named("agent-gateway")


# --- ownership ------------------------------------------------------------------------------


def test_volumes_and_data_dir_are_given_to_the_agent_but_never_the_workspace(box: Box) -> None:
    (box.data / "gateway.db").write_bytes(b"")
    (box.workspace / "main.py").write_text("print('mine')\n")
    run = box.start("agent-gateway", "serve")
    _final(run)

    owner = f"{AGENT_UID}:{AGENT_GID}"
    recursive = {c.args[-1] for c in run.named("chown") if c.args[:2] == ("-R", owner)}
    assert recursive == {str(d) for d in box.volume_dirs()}
    top_only = {c.args[-1] for c in run.named("chown") if c.args[:2] == ("-h", owner)}
    assert {str(box.home), str(box.data / "gateway.db")} <= top_only
    touched = [a for c in run.named("chown") for a in c.args]
    assert not [a for a in touched if a.startswith(str(box.workspace))]


def test_symlinks_the_agent_could_plant_are_never_chowned(box: Box) -> None:
    outside = box.root / "outside"
    outside.write_text("root's file\n")
    (box.data / "evil").symlink_to(outside)
    shutil.rmtree(box.home / ".codex")
    (box.home / ".codex").symlink_to(box.root, target_is_directory=True)
    run = box.start("agent-gateway", "serve")
    _final(run)
    touched = {c.args[-1] for c in run.named("chown")}
    assert str(box.data / "evil") not in touched
    assert str(box.home / ".codex") not in touched


def test_nothing_is_chowned_when_the_agent_already_owns_it(box: Box) -> None:
    (box.data / "gateway.db").write_bytes(b"")
    box.set_ids(self_ids=(0, 0), agent_ids=(os.getuid(), os.getgid()))
    run = box.start("agent-gateway", "serve")
    assert_exec_as_agent(run, ["agent-gateway", "serve"], (os.getuid(), os.getgid()))
    assert not run.named("chown")


# --- started as another user (compose `user:`) ----------------------------------------------


def test_as_a_non_root_user_it_changes_no_ids_and_execs_directly(box: Box) -> None:
    box.set_ids(self_ids=(4321, 4321), agent_ids=(AGENT_UID, AGENT_GID))
    run = box.start("agent-gateway", "serve", PUID="1000", PGID="1000")

    final = _final(run)
    assert final.argv == ("agent-gateway", "serve")
    for command in ("usermod", "groupmod", "chown", "setpriv"):
        assert not run.named(command), command
    assert run.gateway_commands() == [("migrate",), ("serve",)]
    assert "PUID/PGID are ignored" in run.stderr
    assert (box.data / "token").read_text() == GOOD_TOKEN + "\n"


def test_as_a_non_root_user_a_missing_data_dir_is_a_clear_error(box: Box) -> None:
    box.set_ids(self_ids=(4321, 4321), agent_ids=(AGENT_UID, AGENT_GID))
    run = box.start("agent-gateway", "serve", GATEWAY_STORAGE__DATA_DIR=str(box.root / "nope"))
    assert run.returncode != 0
    assert "data directory" in run.stderr
    assert "not writable" in run.stderr
    assert not run.named("agent-gateway")


# --- CLI version overrides ------------------------------------------------------------------


def _npm_install(prefix: Path, spec: str) -> tuple[str, ...]:
    return (
        "install",
        "--prefix",
        str(prefix),
        "--no-save",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        spec,
    )


def test_overrides_install_exactly_the_requested_versions_as_the_agent(box: Box) -> None:
    run = box.start(
        "agent-gateway",
        "serve",
        CLAUDE_CODE_CLI_VERSION="2.1.331",
        OPENCODE_CLI_VERSION="latest",
        CODEX_CLI_VERSION="",
    )

    _final(run)
    npm = run.named("npm")
    assert [c.args for c in npm] == [
        _npm_install(box.cli_prefix, "@anthropic-ai/claude-code@2.1.331"),
        _npm_install(box.cli_prefix, "opencode-ai@latest"),
    ]
    for call in npm:
        assert run.through_setpriv(call).args[0] == f"--reuid={AGENT_UID}"
    # before the database and the server
    assert run.calls.index(npm[-1]) < run.calls.index(run.named("agent-gateway")[0])


def test_without_overrides_npm_is_not_run(box: Box) -> None:
    run = box.start("agent-gateway", "serve")
    _final(run)
    assert not run.named("npm")


@pytest.mark.parametrize(
    "version",
    [
        "^2.1.0",
        "2.1",
        "--registry=http://127.0.0.1:1/",
        "file:../evil",
        "https://127.0.0.1/x.tgz",
        "1.2.3 && touch pwned",
        "1.2.3\n",
        "../x",
    ],
)
def test_a_malformed_version_stops_start_up_with_a_clear_message(box: Box, version: str) -> None:
    run = box.start("agent-gateway", "serve", CODEX_CLI_VERSION=version)
    assert run.returncode != 0
    assert "CODEX_CLI_VERSION" in run.stderr
    assert "is not a version" in run.stderr
    assert not run.named("npm")
    assert not run.named("agent-gateway")
    assert not run.named("chown")


def test_a_failing_npm_stops_start_up_naming_package_and_version(box: Box) -> None:
    run = box.start("agent-gateway", "serve", CODEX_CLI_VERSION="0.170.0", FAKE_NPM_EXIT="1")
    assert run.returncode != 0
    assert "could not install @openai/codex@0.170.0 (from CODEX_CLI_VERSION)" in run.stderr
    assert not run.named("agent-gateway")


# --- credentials and the token --------------------------------------------------------------

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-secret-value-0001",
    "ANTHROPIC_AUTH_TOKEN": "auth-token-secret-value-0002",
    "CLAUDE_CODE_OAUTH_TOKEN": "oauth-secret-value-0003",
    "OPENAI_API_KEY": "sk-openai-secret-value-0004",
    "OPENROUTER_API_KEY": "sk-or-secret-value-0005",
    "GATEWAY_TOKEN": "gateway-token-secret-value-0006-abcdefghij",
}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_secret_list_covers_everything_the_helper_consumes() -> None:
    assert set(SECRETS) == set(CREDENTIALS.INJECTED)


def test_secrets_land_in_files_with_mode_600_and_nowhere_else(box: Box) -> None:
    run = box.start("agent-gateway", "serve", CODEX_CLI_VERSION="0.170.0", **SECRETS)
    _final(run)

    claude = json.loads((box.home / ".claude" / "settings.json").read_text())
    assert claude == {
        "env": {k: SECRETS[k] for k in CREDENTIALS.CLAUDE_ENV},
    }
    codex = json.loads((box.home / ".codex" / "auth.json").read_text())
    assert codex == {"auth_mode": "apikey", "OPENAI_API_KEY": SECRETS["OPENAI_API_KEY"]}
    opencode = json.loads((box.home / ".local" / "share" / "opencode" / "auth.json").read_text())
    assert opencode == {
        "anthropic": {"type": "api", "key": SECRETS["ANTHROPIC_API_KEY"]},
        "openai": {"type": "api", "key": SECRETS["OPENAI_API_KEY"]},
        "openrouter": {"type": "api", "key": SECRETS["OPENROUTER_API_KEY"]},
    }
    token = box.data / "token"
    assert token.read_text() == SECRETS["GATEWAY_TOKEN"] + "\n"
    written = [
        box.home / ".claude" / "settings.json",
        box.home / ".codex" / "auth.json",
        box.home / ".local" / "share" / "opencode" / "auth.json",
        token,
    ]
    assert [_mode(p) for p in written] == [0o600] * 4

    helper = next(c for c in run.calls if c.name == "setpriv" and "python3" in c.args)
    assert helper.args[0] == f"--reuid={AGENT_UID}"  # written as the agent
    for secret in SECRETS.values():
        assert secret not in run.stdout + run.stderr
        for call in run.calls:
            assert not [a for a in call.args if secret in a], call.argv
    for call in run.named("npm") + run.named("agent-gateway"):  # CLI installs, migrate, serve
        leaked = [k for k, v in call.env.items() if v in SECRETS.values()]
        assert not leaked, (call.argv, leaked)
    assert "ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN" in run.stderr


def test_existing_settings_and_logins_on_the_volumes_are_kept(box: Box) -> None:
    settings = box.home / ".claude" / "settings.json"
    settings.write_text(json.dumps({"theme": "dark", "env": {"HTTPS_PROXY": "http://p:3128"}}))
    codex = box.home / ".codex" / "auth.json"
    codex.write_text(json.dumps({"auth_mode": "chatgpt", "tokens": {"refresh_token": "r"}}))
    opencode = box.home / ".local" / "share" / "opencode" / "auth.json"
    opencode.parent.mkdir(parents=True, exist_ok=True)
    opencode.write_text(json.dumps({"google": {"type": "api", "key": "g"}}))

    run = box.start("agent-gateway", "serve", ANTHROPIC_API_KEY="a-key", OPENAI_API_KEY="o-key")
    _final(run)

    assert json.loads(settings.read_text()) == {
        "theme": "dark",
        "env": {"HTTPS_PROXY": "http://p:3128", "ANTHROPIC_API_KEY": "a-key"},
    }
    assert json.loads(codex.read_text()) == {
        "auth_mode": "apikey",
        "tokens": {"refresh_token": "r"},
        "OPENAI_API_KEY": "o-key",
    }
    assert json.loads(opencode.read_text()) == {
        "google": {"type": "api", "key": "g"},
        "anthropic": {"type": "api", "key": "a-key"},
        "openai": {"type": "api", "key": "o-key"},
    }


def test_a_settings_file_that_is_not_json_is_refused_not_overwritten(box: Box) -> None:
    settings = box.home / ".claude" / "settings.json"
    settings.write_text("{ not json")
    run = box.start("agent-gateway", "serve", ANTHROPIC_API_KEY="a-key-that-stays-secret")
    assert run.returncode != 0
    assert f"{settings} is not valid JSON" in run.stderr
    assert "a-key-that-stays-secret" not in run.stderr
    assert settings.read_text() == "{ not json"
    assert not run.named("agent-gateway")


def test_an_unchanged_file_is_not_rewritten(box: Box) -> None:
    run = box.start("agent-gateway", "serve", OPENAI_API_KEY="o-key")
    _final(run)
    auth = box.home / ".codex" / "auth.json"
    before = auth.stat()
    again = box.start("agent-gateway", "serve", OPENAI_API_KEY="o-key")
    _final(again)
    assert (auth.stat().st_ino, auth.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert "auth.json" not in again.stderr


@pytest.fixture
def no_token(box: Box) -> Box:
    del box.env["GATEWAY_TOKEN"]
    return box


def test_without_any_token_start_up_stops_and_says_how_to_make_one(no_token: Box) -> None:
    run = no_token.start("agent-gateway", "serve")
    assert run.returncode != 0
    for advice in ("GATEWAY_TOKEN", "at least 32 characters", "openssl rand -base64 32"):
        assert advice in run.stderr
    assert not run.named("agent-gateway")


@pytest.mark.parametrize("token", ["short-token", "has space" + "x" * 40, "tab\t" + "y" * 40])
def test_a_short_or_malformed_token_is_refused_without_echoing_it(box: Box, token: str) -> None:
    run = box.start("agent-gateway", "serve", GATEWAY_TOKEN=token)
    assert run.returncode != 0
    assert "GATEWAY_TOKEN" in run.stderr
    assert token not in run.stderr
    assert not (box.data / "token").exists()
    assert not run.named("agent-gateway")


@pytest.mark.parametrize(
    "setup",
    [
        lambda b: (b.data / "token").write_text("x" * 43 + "\n"),
        lambda b: b.env.update(GATEWAY_SERVER__TOKEN="y" * 40),
    ],
    ids=["token-file", "server-token"],
)
def test_an_existing_token_file_or_server_token_is_enough(
    no_token: Box, setup: Callable[[Box], object]
) -> None:
    setup(no_token)
    run = no_token.start("agent-gateway", "serve")
    assert _final(run).argv == ("agent-gateway", "serve")


def test_a_token_file_too_short_to_be_used_is_refused(no_token: Box) -> None:
    (no_token.data / "token").write_text("short\n")
    run = no_token.start("agent-gateway", "serve")
    assert run.returncode != 0
    assert "fewer than 32 characters" in run.stderr
