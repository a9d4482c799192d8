"""The harness of the entrypoint tests: docker/entrypoint.sh under bash, with the system
commands it calls replaced by recording fakes.

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
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

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


def final_command(run: Run) -> Call:
    """The command the entrypoint exec'd: the last call, in the entrypoint's own process."""
    assert run.returncode == 0, run.stderr
    last = run.calls[-1]
    assert last.pid == run.pid, "the final command was not exec'd by the entrypoint"
    return last


def assert_exec_as_agent(run: Run, argv: Sequence[str], ids: tuple[int, int]) -> None:
    final = final_command(run)
    assert final.argv == tuple(argv)
    setpriv = run.through_setpriv(final)
    assert setpriv.pid == run.pid
    assert setpriv.args == (f"--reuid={ids[0]}", f"--regid={ids[1]}", "--init-groups", "--", *argv)


def make_fake_bin(directory: Path) -> Path:
    """The recording fakes, first on PATH, written into ``directory``."""
    for name, body in FAKES.items():
        path = directory / name
        path.write_text(f"#!{BASH}\n{RECORD}{body}\n")
        path.chmod(0o755)
    (directory / "python3").symlink_to(sys.executable)
    return directory


def make_box(tmp_path: Path, fake_bin: Path) -> Box:
    """A container's directories under ``tmp_path``, started as root by default."""
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
