"""T6 at the point of use: a workspace is checked again right where a CLI is started in it
(the process runner) or pointed at it (the shared Codex and OpenCode servers).

Real directories, symlinks and child processes; the providers run against the fake CLIs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.process.childspec import ProcessSpec, child_environment
from app.process.managed import SpawnError
from app.process.runner import ProcessRunner
from app.process.workspaces import WorkspaceMoved, check_confined, open_confined
from app.providers.base import SessionSpec, TurnOutcome
from app.providers.codex.provider import CodexProvider
from app.providers.descriptor import BuildContext
from app.providers.opencode.provider import OpenCodeProvider
from app.settings import ProviderSettings
from tests.fakes.hooks import RecordingHooks as Hooks

FAKES = Path(__file__).resolve().parent.parent / "fakes"
SH = "/bin/sh"
# Prints the directory it runs in and leaves a mark there.
PWD_AND_MARK = "pwd -P; : > ran-here"


class Layout:
    """``roots/<ws>`` is a session's workspace; ``outside`` is a directory beyond the roots."""

    def __init__(self, base: Path) -> None:
        self.root = base / "roots"
        self.workspace = self.root / "ws"
        self.outside = base / "outside"
        self.parked = base / "parked"
        for path in (self.workspace, self.outside):
            path.mkdir(parents=True)

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.root,)

    def swap(self, target: Path | None = None) -> None:
        """Replace the workspace by a symlink (to ``outside`` by default)."""
        self.workspace.rename(self.parked)
        self.workspace.symlink_to(target or self.outside, target_is_directory=True)

    def restore(self) -> None:
        self.workspace.unlink()
        self.parked.rename(self.workspace)


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(tmp_path.resolve())


@pytest.fixture
async def runner() -> AsyncIterator[ProcessRunner]:
    runner = ProcessRunner()
    yield runner
    await runner.aclose(grace_s=0.5)


def spec_in(workspace: Path, roots: tuple[Path, ...], script: str = PWD_AND_MARK) -> ProcessSpec:
    env = child_environment(os.environ, passthrough=(), overlay={})
    return ProcessSpec(argv=(SH, "-c", script), cwd=workspace, env=env, confine_to=roots)


async def output_of(runner: ProcessRunner, spec: ProcessSpec) -> list[bytes]:
    process = await runner.spawn(spec)
    lines = []
    async with asyncio.timeout(10):
        while (line := await process.read_line()) is not None:
            lines.append(line)
    await process.stop(grace_s=1)
    return lines


# --- the check ------------------------------------------------------------------------------


def test_t6_the_workspace_opens_as_the_directory_its_real_path_names(layout: Layout) -> None:
    fd = open_confined(layout.workspace, layout.roots)
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(layout.workspace))
        assert os.get_inheritable(fd) is False
    finally:
        os.close(fd)
    check_confined(layout.root, layout.roots)  # the root itself is a workspace too


def test_t6_the_opened_directory_stays_itself_when_its_path_is_swapped(layout: Layout) -> None:
    before = os.stat(layout.workspace)
    fd = open_confined(layout.workspace, layout.roots)
    try:
        layout.swap()
        assert os.path.samestat(os.fstat(fd), before)
        assert not os.path.samestat(os.fstat(fd), os.stat(layout.outside))
    finally:
        os.close(fd)


@pytest.mark.parametrize("inside", [False, True], ids=["to-outside", "back-into-a-root"])
def test_t6_a_workspace_replaced_by_a_symlink_is_refused(layout: Layout, *, inside: bool) -> None:
    elsewhere = layout.root / "other"
    elsewhere.mkdir()
    layout.swap(elsewhere if inside else layout.outside)
    with pytest.raises(WorkspaceMoved) as refused:
        check_confined(layout.workspace, layout.roots)
    assert not refused.value.missing
    assert "replaced by a symlink" in refused.value.detail
    assert str(elsewhere if inside else layout.outside) in refused.value.detail
    layout.restore()
    check_confined(layout.workspace, layout.roots)


def test_t6_a_symlinked_directory_above_the_workspace_is_refused(layout: Layout) -> None:
    deep = layout.root / "team" / "ws"
    deep.mkdir(parents=True)
    (layout.outside / "ws").mkdir()
    (layout.root / "team").rename(layout.parked)
    (layout.root / "team").symlink_to(layout.outside)
    with pytest.raises(WorkspaceMoved) as refused:
        check_confined(deep, layout.roots)
    assert f"{layout.root / 'team'} was replaced by a symlink" in refused.value.detail


def test_t6_a_path_outside_every_root_is_refused(layout: Layout) -> None:
    evil = layout.root.with_name("roots-evil")  # shares the root's prefix, not its directory
    evil.mkdir()
    for path in (evil, layout.outside, Path("/")):
        with pytest.raises(WorkspaceMoved, match="outside every configured root"):
            check_confined(path, layout.roots)
    for path in (Path("roots/ws"), layout.root / ".." / "outside", Path(f"{layout.root}/\x00")):
        with pytest.raises(WorkspaceMoved, match="absolute path"):
            check_confined(path, layout.roots)


def test_t6_a_removed_or_replaced_workspace_is_missing(layout: Layout) -> None:
    layout.workspace.rmdir()
    with pytest.raises(WorkspaceMoved) as gone:
        check_confined(layout.workspace, layout.roots)
    assert gone.value.missing
    assert "no longer exists" in gone.value.detail
    layout.workspace.write_text("a file now")
    with pytest.raises(WorkspaceMoved) as file:
        check_confined(layout.workspace, layout.roots)
    assert file.value.missing
    assert "no longer a directory" in file.value.detail


# --- the runner -----------------------------------------------------------------------------


@pytest.mark.uvloop
async def test_t6_a_confined_child_starts_in_the_workspace(
    runner: ProcessRunner, layout: Layout
) -> None:
    lines = await output_of(runner, spec_in(layout.workspace, layout.roots))
    assert lines == [str(layout.workspace).encode()]
    assert (layout.workspace / "ran-here").exists()


@pytest.mark.uvloop
async def test_t6_the_runner_refuses_a_swapped_workspace_and_starts_nothing(
    runner: ProcessRunner, layout: Layout
) -> None:
    layout.swap()
    with pytest.raises(SpawnError) as refused:
        await runner.spawn(spec_in(layout.workspace, layout.roots))
    assert refused.value.kind == "cwd_rejected"
    assert "replaced by a symlink" in refused.value.detail
    assert runner.spawn_count == 0
    assert runner.live == ()
    assert list(layout.outside.iterdir()) == []

    layout.restore()
    layout.workspace.rmdir()
    with pytest.raises(SpawnError) as gone:
        await runner.spawn(spec_in(layout.workspace, layout.roots))
    assert gone.value.kind == "bad_cwd"
    assert runner.spawn_count == 0


# Enough that spawning by path after the check (the gap this closes) lands a child outside in
# most runs; each spawn costs about a millisecond.
SPAWNS = 200

Flipper = tuple[subprocess.Popen[bytes], os.stat_result]

# Swaps the workspace and a symlink to ``outside`` atomically (renameat2 RENAME_EXCHANGE), so
# the path is always one or the other, never missing.
FLIP = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
ws, link = (os.fsencode(arg) for arg in sys.argv[1:])
if libc.renameat2(-100, ws, -100, link, 2) != 0 or libc.renameat2(-100, ws, -100, link, 2):
    sys.exit("renameat2(RENAME_EXCHANGE) failed: " + os.strerror(ctypes.get_errno()))
print("go", flush=True)
while True:
    libc.renameat2(-100, ws, -100, link, 2)
"""


@pytest.fixture
def flipper(layout: Layout) -> Iterator[Flipper]:
    """A process that swaps the workspace for a symlink to ``outside`` and back, endlessly;
    with the workspace directory's own ``stat``."""
    real = os.stat(layout.workspace)
    link = layout.root / "link"
    link.symlink_to(layout.outside, target_is_directory=True)
    argv = [sys.executable, "-c", FLIP, str(layout.workspace), str(link)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert process.stdout is not None
    started = process.stdout.readline()
    if started != b"go\n":
        process.wait()
        process.stdout.close()
        pytest.skip("this file system cannot exchange a directory and a symlink atomically")
    yield process, real
    process.kill()
    process.wait()
    process.stdout.close()
    if layout.workspace.is_symlink():  # stopped between two exchanges: put it back
        layout.workspace.rename(layout.parked)
        link.rename(layout.workspace)


@pytest.mark.uvloop
async def test_t6_no_child_lands_outside_while_the_workspace_is_being_swapped(
    runner: ProcessRunner, layout: Layout, flipper: Flipper
) -> None:
    """Every spawn either starts in the workspace's own directory or is refused."""
    process, real = flipper
    started, refused = 0, []
    for _ in range(SPAWNS):
        spec = spec_in(layout.workspace, layout.roots, 'stat -L -c "%d:%i" .')
        try:
            lines = await output_of(runner, spec)
        except SpawnError as exc:
            refused.append(exc.kind)
            continue
        started += 1
        assert lines == [f"{real.st_dev}:{real.st_ino}".encode()]
    assert process.poll() is None  # it swapped all along
    assert set(refused) <= {"cwd_rejected"}
    assert started + len(refused) == SPAWNS


# --- the shared servers ---------------------------------------------------------------------


def logged(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_refused(outcome: TurnOutcome, cli: str) -> None:
    assert outcome.status == "failed"
    error = outcome.error
    assert error is not None
    assert (error.kind, error.reason, error.retryable) == (
        "invalid_request",
        "workspace_rejected",
        False,
    )
    assert error.message.startswith(f"{cli} was not run")
    assert "replaced by a symlink" in error.message


def session_spec(layout: Layout) -> SessionSpec:
    return SessionSpec(session_id="s1", workspace=layout.workspace, model=None, approval_mode="ask")


async def test_t6_codex_gets_no_thread_or_turn_in_a_swapped_workspace(
    runner: ProcessRunner, layout: Layout, tmp_path: Path
) -> None:
    log = tmp_path / "codex.log"
    provider = CodexProvider(
        BuildContext(
            name="codex",
            settings=ProviderSettings(
                startup_timeout_s=5, stop_grace_s=1, env={"FAKE_CODEX_LOG": str(log)}
            ),
            executable=str(FAKES / "fake_codex_app_server.py"),
            runner=runner,
            parent_env={"PATH": os.environ["PATH"]},
            workspace_roots=layout.roots,
        )
    )
    try:
        session = provider.open_session(session_spec(layout))
        layout.swap()
        assert_refused(await session.run_turn("hi", Hooks()), "Codex")
        sent = [line["in"].get("method") for line in logged(log) if "in" in line]
        assert "thread/start" not in sent
        assert "turn/start" not in sent

        layout.restore()
        assert (await session.run_turn("hi", Hooks())).status == "completed"
        layout.swap()  # the thread is loaded now: the next turn/start is refused all the same
        assert_refused(await session.run_turn("again", Hooks()), "Codex")
        sent = [line["in"].get("method") for line in logged(log) if "in" in line]
        assert sent.count("turn/start") == 1
    finally:
        await provider.aclose()


async def test_t6_opencode_gets_no_thread_or_prompt_in_a_swapped_workspace(
    runner: ProcessRunner, layout: Layout, tmp_path: Path
) -> None:
    log = tmp_path / "opencode.log"
    executable = tmp_path / "opencode"
    # The fake needs this interpreter's packages (starlette, uvicorn), whatever is on PATH.
    executable.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{FAKES / "fake_opencode_serve.py"}" "$@"\n'
    )
    executable.chmod(0o755)
    provider = OpenCodeProvider(
        BuildContext(
            name="opencode",
            settings=ProviderSettings(
                startup_timeout_s=20,
                stop_grace_s=2,
                env={"FAKE_OPENCODE_LOG": str(log), "XDG_DATA_HOME": str(tmp_path / "data")},
            ),
            executable=str(executable),
            runner=runner,
            parent_env={"PATH": os.environ["PATH"]},
            workspace_roots=layout.roots,
        )
    )
    try:
        session = provider.open_session(session_spec(layout))
        layout.swap()
        assert_refused(await session.run_turn("hi", Hooks()), "OpenCode")
        paths = [(line.get("method"), line.get("path", "")) for line in logged(log)]
        assert ("POST", "/session") not in paths
        assert not [p for m, p in paths if p.endswith("/prompt_async")]
    finally:
        await provider.aclose()
