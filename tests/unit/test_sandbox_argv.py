"""The sandbox's command line (app/process/sandbox.py) and what one session's agent gets
(app/providers/sandboxing.py), on real paths under tmp_path: no process is started."""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from app.process.sandbox import WORKSPACE_SOURCE, Confinement, wrap
from app.providers.catalog import described
from app.providers.sandboxing import (
    LoginFiles,
    Sandbox,
    SandboxStatus,
    hidden_paths,
    installation,
)
from app.settings import load_settings

MOUNTS = {"--ro-bind": 2, "--bind": 2, "--tmpfs": 1, "--symlink": 2, "--proc": 1, "--dev": 1}
"""bwrap's mount options and how many arguments each takes (the last one is the target)."""


def mounts(argv: Sequence[str]) -> list[tuple[str, ...]]:
    """The mounts of a ``bwrap`` command line, in order: ``(option, *arguments)``."""
    found: list[tuple[str, ...]] = []
    i = 0
    while i < len(argv) and argv[i] != "--":
        width = MOUNTS.get(argv[i])
        if width is None:
            i += 1
            continue
        found.append(tuple(argv[i : i + 1 + width]))
        i += 1 + width
    return found


def targets(argv: Sequence[str]) -> list[str]:
    return [mount[-1] for mount in mounts(argv)]


def where(argv: Sequence[str], *mount: str) -> int:
    """The position of ``mount`` among the mounts (it must be there exactly once)."""
    found = mounts(argv)
    assert found.count(mount) == 1, (mount, found)
    return found.index(mount)


def dirs(*paths: Path) -> None:
    for path in paths:
        path.mkdir(parents=True, exist_ok=True)


# --- wrap ------------------------------------------------------------------------------------


def test_mounts_go_tmp_first_covers_after_what_they_cover_and_the_home_after_the_covers(
    tmp_path: Path,
) -> None:
    workspace, tool = tmp_path / "roots" / "a", tmp_path / "tool"
    data = workspace / ".gateway"
    home = data / "homes" / "ses_a"
    dirs(workspace, tool, home)
    config = workspace / "gateway.toml"
    config.write_text("[server]\n")
    login = tmp_path / "credentials.json"
    login.write_text("{}")
    credentials = home / ".claude" / ".credentials.json"
    confinement = Confinement(
        bwrap="/usr/bin/bwrap",
        read_only=(tool,),
        home=home,
        files=((login, credentials),),
        workspace=workspace,
        hidden=(config, data),
    )
    argv = wrap(confinement, ("claude", "-p"))

    assert argv[0] == "/usr/bin/bwrap"
    assert argv[-3:] == ("--", "claude", "-p")
    assert {"--die-with-parent", "--unshare-user", "--unshare-pid", "--cap-drop"} <= set(argv)
    assert "--uid" not in argv
    assert argv[argv.index("--chdir") + 1] == str(workspace)
    tmp = where(argv, "--tmpfs", "/tmp")
    binds = [i for i, m in enumerate(mounts(argv)) if m[0] in {"--bind", "--ro-bind"}]
    assert tmp < min(binds)  # the workspace under /tmp is bound onto the private /tmp
    tool_at = where(argv, "--ro-bind", str(tool), str(tool))
    # The workspace comes from the directory bwrap starts in, never from the path again.
    workspace_at = where(argv, "--bind", WORKSPACE_SOURCE, str(workspace))
    data_cover = where(argv, "--tmpfs", str(data))
    config_cover = where(argv, "--ro-bind", "/dev/null", str(config))
    home_at = where(argv, "--bind", str(home), str(home))
    login_at = where(argv, "--ro-bind", str(login), str(credentials))
    assert tmp < tool_at < workspace_at < min(data_cover, config_cover)
    assert max(data_cover, config_cover) < home_at < login_at


def test_a_hidden_path_under_a_covered_directory_gets_no_cover_of_its_own(
    tmp_path: Path,
) -> None:
    """A cover inside a cover would make its mount point, and so show its name."""
    workspace = tmp_path / "a"
    data = workspace / ".gateway"
    dirs(data / "homes")
    (data / "gateway.db").write_bytes(b"SQLite format 3\0")
    hidden = (data / "gateway.db", data / "homes", data)  # innermost first, as given
    argv = wrap(Confinement(bwrap="bwrap", workspace=workspace, hidden=hidden), ("true",))

    inside = [t for t in targets(argv) if Path(t).is_relative_to(data)]
    assert inside == [str(data)]


def test_a_worktree_under_a_covered_root_is_bound_again_after_the_covers(
    tmp_path: Path,
) -> None:
    """The worktrees root is covered; the session's own worktree shows through, and what is
    hidden inside that worktree is covered again after it."""
    shared, repo = tmp_path / "shared", tmp_path / "roots" / "repo"
    data = shared / "data"
    tree, git_dir = data / "worktrees" / "ses_a", repo / ".git"
    inside = tree / "secret"
    dirs(inside, git_dir / "hooks")
    (git_dir / "config").write_text("[core]\n")
    confinement = Confinement(
        bwrap="bwrap",
        writable=(shared, git_dir),
        guarded=(git_dir / "config", git_dir / "hooks"),
        workspace=tree,
        hidden=(data, data / "worktrees", inside),
    )

    argv = wrap(confinement, ("true",))

    found = mounts(argv)
    first = found.index(("--bind", WORKSPACE_SOURCE, str(tree)))
    again = len(found) - 1 - found[::-1].index(("--bind", WORKSPACE_SOURCE, str(tree)))
    cover = where(argv, "--tmpfs", str(data))
    git_at = where(argv, "--bind", str(git_dir), str(git_dir))
    config_at = where(argv, "--ro-bind", str(git_dir / "config"), str(git_dir / "config"))
    hooks_at = where(argv, "--ro-bind", str(git_dir / "hooks"), str(git_dir / "hooks"))
    inside_cover = len(found) - 1 - found[::-1].index(("--tmpfs", str(inside)))
    assert git_at < min(config_at, hooks_at) < first < cover < again < inside_cover


def test_a_hidden_path_outside_every_bind_adds_nothing(tmp_path: Path) -> None:
    workspace, elsewhere = tmp_path / "a", tmp_path / "data"
    dirs(workspace, elsewhere)
    (elsewhere / "gateway.toml").write_text("")
    missing = workspace / "not-there"
    plain = wrap(Confinement(bwrap="bwrap", workspace=workspace), ("true",))
    hidden = (elsewhere, elsewhere / "gateway.toml", missing)

    argv = wrap(Confinement(bwrap="bwrap", workspace=workspace, hidden=hidden), ("true",))

    assert argv == plain


def test_a_hidden_file_under_the_system_is_covered_with_dev_null(tmp_path: Path) -> None:
    """The configuration file under ``/etc`` (bound read-only) is covered."""
    hosts = Path("/etc/hostname") if Path("/etc/hostname").is_file() else Path("/etc/passwd")
    argv = wrap(Confinement(bwrap="bwrap", hidden=(hosts,)), ("true",))

    assert where(argv, "--ro-bind", "/dev/null", str(hosts)) > where(
        argv, "--ro-bind", "/etc", "/etc"
    )


def test_without_a_workspace_the_child_starts_in_its_home_never_root_inside(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    dirs(home)
    argv = wrap(Confinement(bwrap="bwrap", home=home, as_user=1000), ("true",))

    assert WORKSPACE_SOURCE not in argv
    assert argv[argv.index("--chdir") + 1] == str(home)
    assert argv[argv.index("--uid") + 1] == argv[argv.index("--gid") + 1] == "1000"
    assert argv.index("--unshare-user") < argv.index("--uid")


# --- Sandbox.confine: the session's home and the operator's login files -----------------------


def sandbox(tmp_path: Path, provider: str) -> Sandbox:
    """A sandbox that is on, with ``provider``'s login files, homes under tmp_path."""
    credentials = described(provider).credentials
    login = LoginFiles(files=credentials.login_files, config_dirs=credentials.config_dirs)
    on = SandboxStatus(mode="bwrap", reason="test")
    return Sandbox(status=on, homes_dir=tmp_path / "homes", login=login)


def operator(tmp_path: Path, files: Mapping[str, str]) -> Path:
    """The operator's home with ``files`` (relative path → content)."""
    home = tmp_path / "operator"
    for relative, content in files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(content)
    return home


@pytest.mark.parametrize(
    ("provider", "variable", "relative"),
    [
        ("codex", "CODEX_HOME", "auth.json"),
        ("claude_code", "CLAUDE_CONFIG_DIR", ".credentials.json"),
    ],
)
def test_a_login_file_is_found_where_the_variable_moved_the_config_directory(
    tmp_path: Path, provider: str, variable: str, relative: str
) -> None:
    default = described(provider).credentials.config_dirs[variable]
    op_home = operator(tmp_path, {f"{default}/{relative}": "the default place"})
    moved = tmp_path / "elsewhere" / provider
    moved.mkdir(parents=True)
    (moved / relative).write_text("the moved place")
    env = {"HOME": str(op_home), variable: str(moved), "PATH": os.defpath}

    confinement, inside = sandbox(tmp_path, provider).confine(
        session_id="ses_1", workspace=None, executable="sh", env=env
    )

    home = tmp_path / "homes" / "ses_1"
    assert confinement is not None
    target = home / default / relative
    assert confinement.files == ((moved / relative, target),)
    assert inside["HOME"] == str(home)
    assert inside[variable] == str(home / default)  # its own config directory, not the moved
    assert target.is_file()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert confinement.home == home


def test_a_login_file_is_found_under_home_and_bound_from_where_its_link_points(
    tmp_path: Path,
) -> None:
    op_home = operator(tmp_path, {"store/auth.json": "{}"})
    (op_home / ".codex").mkdir()
    (op_home / ".codex" / "auth.json").symlink_to(op_home / "store" / "auth.json")
    env = {"HOME": str(op_home), "PATH": os.defpath}

    confinement, _ = sandbox(tmp_path, "codex").confine(
        session_id="ses_1", workspace=None, executable="sh", env=env
    )

    assert confinement is not None
    target = tmp_path / "homes" / "ses_1" / ".codex" / "auth.json"
    assert confinement.files == ((op_home / "store" / "auth.json", target),)


def test_no_login_file_binds_nothing_and_an_off_sandbox_changes_nothing(tmp_path: Path) -> None:
    env = {"HOME": str(operator(tmp_path, {})), "PATH": os.defpath}
    confinement, _ = sandbox(tmp_path, "claude_code").confine(
        session_id="ses_1", workspace=None, executable="sh", env=env
    )
    assert confinement is not None
    assert confinement.files == ()

    off = Sandbox(status=SandboxStatus(mode="none", reason="test"), homes_dir=tmp_path / "h")
    assert off.confine(session_id="ses_2", workspace=None, executable="sh", env=env) == (
        None,
        env,
    )
    assert not (tmp_path / "h").exists()


# --- installation: what running the agent needs to read --------------------------------------


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_node_modules_script_named_through_a_symlink_binds_both_node_modules(
    tmp_path: Path,
) -> None:
    """``agents -> /elsewhere/agents``: bwrap runs the command by the name it was given, and
    Node.js loads the script's modules from where it really is."""
    store = tmp_path / "store" / "agents" / "node_modules"
    executable(store / "pkg" / "cli.js", "#!/bin/sh\n")
    (store / ".bin").mkdir()
    (store / ".bin" / "agent").symlink_to("../pkg/cli.js")
    (tmp_path / "agents").symlink_to(tmp_path / "store" / "agents")
    named = tmp_path / "agents" / "node_modules" / ".bin" / "agent"

    paths = installation(str(named), {"PATH": os.defpath})

    assert paths == (tmp_path / "agents" / "node_modules", store)


def test_a_plain_executable_binds_its_directory_and_a_missing_one_nothing(
    tmp_path: Path,
) -> None:
    tool = executable(tmp_path / "opt" / "bin" / "agent", "#!/bin/sh\n")

    assert installation("agent", {"PATH": str(tool.parent)}) == (tool.parent,)
    assert installation("no-such-agent", {"PATH": str(tool.parent)}) == ()


@pytest.mark.parametrize("shebang", ["#!{python} -u", "#!/usr/bin/env -S python3 -u"])
def test_an_interpreter_outside_the_system_binds_its_prefix(tmp_path: Path, shebang: str) -> None:
    python = executable(tmp_path / "py" / "bin" / "python3", "")
    tool = executable(tmp_path / "tools" / "agent", shebang.format(python=python) + "\n")
    env = {"PATH": f"{python.parent}:{os.defpath}"}

    assert installation(str(tool), env) == (tool.parent, tmp_path / "py")


def test_a_system_interpreter_adds_nothing(tmp_path: Path) -> None:
    tool = executable(tmp_path / "tools" / "agent", "#!/usr/bin/env sh\n")

    assert installation(str(tool), {"PATH": os.defpath}) == (tool.parent,)


# --- hidden_paths ----------------------------------------------------------------------------


def test_the_gateway_hides_its_data_config_homes_worktrees_records_and_a_database_elsewhere(
    tmp_path: Path,
) -> None:
    config = tmp_path / "etc" / "gateway.toml"
    config.parent.mkdir()
    database = tmp_path / "db" / "gateway.db"
    config.write_text(
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n'
        f'url = "sqlite+aiosqlite:///{database}"\n'
        f'[sandbox]\nhomes_dir = "{tmp_path / "homes"}"\n'
        f'[snapshots]\ndir = "{tmp_path / "records"}"\n'
        f'[workspaces]\nroots = ["{tmp_path}"]\nworktrees_root = "{tmp_path / "trees"}"\n'
    )

    hidden = hidden_paths(load_settings(config))

    assert set(hidden) == {
        tmp_path / "data",
        tmp_path / "homes",
        tmp_path / "trees",
        tmp_path / "records",
        config,
        database,
        *(Path(f"{database}{end}") for end in ("-wal", "-shm", "-journal")),
    }


def test_a_file_the_agents_environment_names_is_shown_read_only(tmp_path: Path) -> None:
    """A settings layer the gateway wrote for the agent (outside its home) reaches it; a
    directory, a list and a missing path do not."""
    layer = tmp_path / "gateway-acp" / "settings.json"
    layer.parent.mkdir()
    layer.write_text("{}")
    env = {
        "PATH": "/usr/bin",
        "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(layer),
        "SOME_DIR": str(tmp_path),
        "SOME_LIST": f"{layer}:{layer}",
        "GONE": str(tmp_path / "missing.json"),
    }

    confinement, _ = sandbox(tmp_path, "acp:qwen").confine(
        session_id="ses_1", workspace=None, executable="sh", env=env
    )

    assert confinement is not None
    assert confinement.exposed == (layer,)
    argv = wrap(confinement, ("true",))
    assert where(argv, "--ro-bind", str(layer), str(layer)) > where(argv, "--tmpfs", "/tmp")


def test_a_named_file_already_shown_writable_stays_writable(tmp_path: Path) -> None:
    """A file the environment names inside the workspace or a read_write path is not bound
    read-only over it (a log the agent appends to)."""
    workspace, shared = tmp_path / "ws", tmp_path / "shared"
    dirs(workspace, shared)
    (workspace / "notes.json").write_text("{}")
    (shared / "spawns.jsonl").write_text("")
    on = dataclasses.replace(sandbox(tmp_path, "claude_code"), read_write=(shared,))
    env = {
        "PATH": "/usr/bin",
        "NOTES": str(workspace / "notes.json"),
        "LOG": str(shared / "spawns.jsonl"),
    }

    confinement, _ = on.confine(session_id="ses_1", workspace=workspace, executable="sh", env=env)

    assert confinement is not None
    assert confinement.exposed == ()
