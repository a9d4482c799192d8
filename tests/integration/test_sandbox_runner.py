"""Real bubblewrap sandboxes started by the process runner: a shell in a session's sandbox
(app/providers/sandboxing.py builds it, app/process/runner.py starts it) and what it sees."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.process.childspec import ProcessSpec, child_environment
from app.process.managed import ManagedProcess, SpawnError
from app.process.runner import ProcessRunner
from app.providers.sandboxing import Sandbox, SandboxStatus, bwrap_problem, inside_uid

SH = "/bin/sh"


@pytest.fixture(scope="module")
def bwrap() -> str:
    """This machine's ``bwrap``, which must be able to start a sandbox here."""
    found = shutil.which("bwrap")
    assert found is not None, "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    problem = bwrap_problem(found, inside_uid())
    assert problem is None, problem
    return found


@pytest.fixture
async def runner() -> AsyncIterator[ProcessRunner]:
    runner = ProcessRunner()
    yield runner
    await runner.aclose(grace_s=0.5)


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    """A workspace root with workspaces ``a`` (``mine.txt`` in it, and the gateway's data
    directory) and ``b`` (``theirs.txt``)."""
    root = tmp_path / "roots"
    for name, file in (("a", "mine.txt"), ("b", "theirs.txt")):
        (root / name).mkdir(parents=True)
        (root / name / file).write_text(f"{name}'s file\n")
    data = root / "a" / ".gateway"
    (data / "homes").mkdir(parents=True)
    (data / "gateway.db").write_text("SQLite format 3\n")
    return root


def sandbox(bwrap: str, roots: Path) -> Sandbox:
    data = roots / "a" / ".gateway"
    on = SandboxStatus(mode="bwrap", reason="test")
    return Sandbox(
        status=on, bwrap=bwrap, homes_dir=data / "homes", hidden=(data, data / "gateway.db")
    )


def spec_in(box: Sandbox, roots: Path, workspace: Path, script: str) -> ProcessSpec:
    """``sh -c script`` in session ``ses_a``'s sandbox, in ``workspace``."""
    env = child_environment(os.environ, passthrough=(), overlay={})
    confinement, inside = box.confine(
        session_id="ses_a", workspace=workspace, executable=SH, env=env
    )
    return ProcessSpec(
        argv=(SH, "-c", script),
        cwd=workspace,
        env=inside,
        confine_to=(roots,),
        sandbox=confinement,
    )


async def output(process: ManagedProcess) -> list[str]:
    """Every line the child writes, once it has exited."""
    lines: list[str] = []
    async with asyncio.timeout(20):
        while (line := await process.read_line()) is not None:
            lines.append(line.decode())
        assert await process.wait() == 0, process.stderr_tail
    return lines


async def run(runner: ProcessRunner, spec: ProcessSpec) -> list[str]:
    return await output(await runner.spawn(spec))


async def test_the_child_sees_its_workspace_and_home_and_not_the_workspace_beside_it(
    bwrap: str, roots: Path, runner: ProcessRunner
) -> None:
    a, b = roots / "a", roots / "b"
    script = (
        f"pwd; cat mine.txt; echo $HOME; test -d $HOME && echo home-ok; "
        f"ls {b} 2>/dev/null || echo b-hidden; ls {roots}"
    )
    seen = await run(runner, spec_in(sandbox(bwrap, roots), roots, a, script))

    home = a / ".gateway" / "homes" / "ses_a"
    # The root shows only the workspace's own mount point.
    assert seen == [str(a), "a's file", str(home), "home-ok", "b-hidden", "a"]


async def test_the_child_sees_only_its_own_pid_namespace(
    bwrap: str, roots: Path, runner: ProcessRunner
) -> None:
    script = "echo $$; ls /proc | grep -E '^[0-9]+$'"
    seen = await run(runner, spec_in(sandbox(bwrap, roots), roots, roots / "a", script))

    shell, pids = int(seen[0]), {int(pid) for pid in seen[1:]}
    assert shell < 10  # its own numbering
    assert str(os.getpid()) not in seen[1:]
    assert len(pids) < 10, pids  # bwrap, the shell and ls: no process of the host


async def test_the_data_directory_inside_the_workspace_is_an_empty_directory(
    bwrap: str, roots: Path, runner: ProcessRunner
) -> None:
    script = "ls -A .gateway; cat .gateway/gateway.db 2>/dev/null || echo db-hidden"
    seen = await run(runner, spec_in(sandbox(bwrap, roots), roots, roots / "a", script))

    assert seen == ["homes", "db-hidden"]  # the mount point of the session's own home


async def test_a_workspace_swapped_for_a_symlink_is_refused_before_the_sandbox_starts(
    bwrap: str, roots: Path, runner: ProcessRunner
) -> None:
    a = roots / "a"
    spec = spec_in(sandbox(bwrap, roots), roots, a, "cat mine.txt")
    a.rename(roots / "a-moved")
    a.symlink_to(roots / "b")  # after the session's workspace was resolved

    with pytest.raises(SpawnError) as caught:
        await runner.spawn(spec)

    assert caught.value.kind == "cwd_rejected"
    assert runner.live == ()


async def test_a_swap_after_the_start_leaves_the_child_in_the_directory_it_was_given(
    bwrap: str, roots: Path, runner: ProcessRunner
) -> None:
    """The workspace is bound from the directory the runner opened, not looked up again."""
    a = roots / "a"
    spec = spec_in(sandbox(bwrap, roots), roots, a, f"echo ready; read go; cat {a}/*.txt")
    process = await runner.spawn(spec)
    async with asyncio.timeout(20):
        assert await process.read_line() == b"ready"  # every mount is made
    a.rename(roots / "a-moved")
    a.symlink_to(roots / "b")
    await process.write_line(b"go")

    assert await output(process) == ["a's file"]


async def test_a_missing_cli_is_cli_missing(bwrap: str, roots: Path, runner: ProcessRunner) -> None:
    spec = spec_in(sandbox(bwrap, roots), roots, roots / "a", "true")
    spec = replace(spec, argv=("no-such-agent-cli", "--version"))

    with pytest.raises(SpawnError) as caught:
        await runner.spawn(spec)

    assert caught.value.kind == "cli_missing"
    assert caught.value.argv0 == "no-such-agent-cli"


async def test_a_missing_bwrap_is_a_spawn_failure_that_names_the_sandbox(
    bwrap: str, roots: Path, tmp_path: Path, runner: ProcessRunner
) -> None:
    missing = str(tmp_path / "no" / "bwrap")
    box = replace(sandbox(bwrap, roots), bwrap=missing)
    spec = spec_in(box, roots, roots / "a", "true")

    with pytest.raises(SpawnError) as caught:
        await runner.spawn(spec)

    assert caught.value.kind == "spawn_failed"
    assert caught.value.argv0 == SH  # the agent's command, as the session knows it
    assert f"cannot start the sandbox {missing}" in caught.value.detail
    assert runner.live == ()
