"""docker/entrypoint.sh as root or another user: the privilege drop, PUID/PGID, ownership
of the volumes and the CLI version overrides (the harness: tests/unit/entrypoint_box.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.unit.entrypoint_box import (
    AGENT_GID,
    AGENT_UID,
    GOOD_TOKEN,
    Box,
    assert_exec_as_agent,
    final_command,
    make_box,
    make_fake_bin,
)


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fake_bin(tmp_path_factory.mktemp("fake-bin"))


@pytest.fixture
def box(tmp_path: Path, fake_bin: Path) -> Box:
    return make_box(tmp_path, fake_bin)


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
    final_command(run)


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
    final_command(run)

    owner = f"{AGENT_UID}:{AGENT_GID}"
    recursive = {c.args[-1] for c in run.named("chown") if c.args[:2] == ("-R", owner)}
    assert recursive == {str(d) for d in box.volume_dirs()}
    top_only = {c.args[-1] for c in run.named("chown") if c.args[:2] == ("-h", owner)}
    assert {str(box.home), str(box.data / "gateway.db")} <= top_only
    touched = [a for c in run.named("chown") for a in c.args]
    assert not [a for a in touched if a.startswith(str(box.workspace))]


SHARED = (
    "GATEWAY_SANDBOX__HOMES_DIR",
    "GATEWAY_SNAPSHOTS__DIR",
    "GATEWAY_WORKSPACES__WORKTREES_ROOT",
)


def test_directories_replicas_share_are_made_private_and_given_to_the_agent(box: Box) -> None:
    shared = box.root / "shared"
    shared.mkdir()
    (shared / "homes").mkdir()  # made on an earlier start
    names = ("homes", "snapshots", "worktrees")
    dirs = {var: shared / name for var, name in zip(SHARED, names, strict=True)}
    run = box.start("agent-gateway", "serve", **{var: str(d) for var, d in dirs.items()})
    final_command(run)

    owner = f"{AGENT_UID}:{AGENT_GID}"
    recursive = {c.args[-1] for c in run.named("chown") if c.args[:2] == ("-R", owner)}
    assert recursive >= {str(d) for d in dirs.values()}
    for made in (dirs["GATEWAY_SNAPSHOTS__DIR"], dirs["GATEWAY_WORKSPACES__WORKTREES_ROOT"]):
        assert made.stat().st_mode & 0o777 == 0o700
    assert str(shared) not in recursive


def test_a_relative_shared_directory_stops_start_up_before_any_change(box: Box) -> None:
    run = box.start("agent-gateway", "serve", GATEWAY_SNAPSHOTS__DIR="shared/snapshots")
    assert run.returncode != 0
    assert "GATEWAY_SNAPSHOTS__DIR=shared/snapshots must be an absolute path" in run.stderr
    assert not run.named("chown")
    assert not run.named("agent-gateway")


def test_symlinks_the_agent_could_plant_are_never_chowned(box: Box) -> None:
    outside = box.root / "outside"
    outside.write_text("root's file\n")
    (box.data / "evil").symlink_to(outside)
    shutil.rmtree(box.home / ".codex")
    (box.home / ".codex").symlink_to(box.root, target_is_directory=True)
    run = box.start("agent-gateway", "serve")
    final_command(run)
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

    final = final_command(run)
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

    final_command(run)
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
    final_command(run)
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
