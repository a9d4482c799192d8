"""The process runner against real child processes: small fake CLIs written into tmp_path."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.process.childspec import BASE_ALLOWED, ProcessSpec, child_environment
from app.process.managed import LineTooLong, ManagedProcess, ProcessError, SpawnError
from app.process.orphans import TAG_ENV
from app.process.runner import ProcessRunner

# The gateway runs on uvloop under uvicorn; its pipe transports differ from asyncio's.
pytestmark = pytest.mark.uvloop

SH = "/bin/sh"

ECHO = """
import sys
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(b"echo:" + line)
    sys.stdout.flush()
sys.stderr.write("bye\\n")
"""

IGNORES_SIGTERM = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(60)
"""


def fake_cli(directory: Path, name: str, body: str, *, interpreter: str = sys.executable) -> Path:
    """Write an executable script run by ``interpreter`` (this test run's Python by default)."""
    path = directory / name
    path.write_text(f"#!{interpreter}\n{textwrap.dedent(body)}")
    path.chmod(0o755)
    return path


def spec_for(executable: Path, *args: str, **overrides: Any) -> ProcessSpec:
    env = child_environment(os.environ, passthrough=(), overlay={})
    return ProcessSpec(argv=(str(executable), *args), cwd=executable.parent, env=env, **overrides)


async def read_all(process: ManagedProcess) -> list[bytes]:
    lines = []
    async with asyncio.timeout(10):
        while (line := await process.read_line()) is not None:
            lines.append(line)
    return lines


def live_group_members(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are not zombies, read from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited while we looked
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


async def process_gone(pid: int) -> None:
    """Return once ``pid`` has terminated (a pidfd turns readable then), reaped or not."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()
    loop.add_reader(pidfd, gone.set)
    try:
        await gone.wait()
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


@pytest.fixture
async def runner() -> AsyncIterator[ProcessRunner]:
    runner = ProcessRunner()
    yield runner
    await runner.aclose(grace_s=0.5)


async def test_echoes_lines_and_exits_cleanly_when_stdin_closes(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "echo", ECHO)))
    spawned_at = time.monotonic()
    await process.write_line(b"hello")
    await process.write_line(b'{"type": "user"}')
    assert await process.read_line() == b"echo:hello"
    assert await process.read_line() == b'echo:{"type": "user"}'
    assert process.last_output_at >= spawned_at
    assert process.returncode is None

    assert await process.stop() == 0
    assert await read_all(process) == []
    assert process.stderr_tail == "bye\n"
    assert process.started_at.tzinfo is not None
    assert runner.live == ()


async def test_strips_crlf_and_returns_an_unterminated_last_line(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    cli = fake_cli(tmp_path, "partial", r"printf 'one\r\ntwo\n\nthree'", interpreter=SH)
    process = await runner.spawn(spec_for(cli))
    assert await read_all(process) == [b"one", b"two", b"", b"three"]
    assert await process.read_line() is None
    assert await process.wait() == 0


async def test_reads_a_five_megabyte_line(runner: ProcessRunner, tmp_path: Path) -> None:
    body = 'import sys; sys.stdout.buffer.write(b"x" * 5_000_000 + b"\\nafter\\n")'
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "big", body)))
    lines = await read_all(process)
    assert [len(line) for line in lines] == [5_000_000, 5]
    assert lines[0] == b"x" * 5_000_000
    assert lines[1] == b"after"


async def test_reads_two_hundred_thousand_small_lines(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    body = 'import sys; sys.stdout.buffer.write(b"".join(b"%d\\n" % i for i in range(200_000)))'
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "many", body)))
    lines = await read_all(process)
    assert len(lines) == 200_000
    assert lines[0] == b"0"
    assert lines[-1] == b"199999"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('sys.stdout.buffer.write(b"y" * 5000 + b"\\n")', id="terminated"),
        pytest.param('sys.stdout.buffer.write(b"y" * 5000); sys.stdout.flush()', id="streaming"),
    ],
)
async def test_a_line_over_the_limit_raises_line_too_long(
    runner: ProcessRunner, tmp_path: Path, body: str
) -> None:
    cli = fake_cli(tmp_path, "long", f"import sys\n{body}\nsys.stdin.read()\n")
    process = await runner.spawn(spec_for(cli, max_line_bytes=1000))
    async with asyncio.timeout(10):
        with pytest.raises(LineTooLong) as raised:
            await process.read_line()
        assert raised.value.limit == 1000
        with pytest.raises(LineTooLong):
            await process.read_line()
    assert process.returncode is None  # left for the caller to stop
    await process.stop()


async def test_a_line_of_exactly_the_limit_is_accepted(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    cli = fake_cli(tmp_path, "edge", 'import sys; sys.stdout.buffer.write(b"z" * 1000 + b"\\r\\n")')
    process = await runner.spawn(spec_for(cli, max_line_bytes=1000))
    assert await read_all(process) == [b"z" * 1000]


async def test_missing_executable_is_cli_missing(runner: ProcessRunner, tmp_path: Path) -> None:
    with pytest.raises(SpawnError) as raised:
        await runner.spawn(spec_for(tmp_path / "no-such-cli"))
    assert raised.value.kind == "cli_missing"
    assert raised.value.argv0 == str(tmp_path / "no-such-cli")
    assert runner.live == ()
    assert runner.spawn_count == 0


async def test_missing_cwd_is_bad_cwd(runner: ProcessRunner, tmp_path: Path) -> None:
    cli = fake_cli(tmp_path, "echo", ECHO)
    spec = ProcessSpec(argv=(str(cli),), cwd=tmp_path / "gone", env={})
    with pytest.raises(SpawnError) as raised:
        await runner.spawn(spec)
    assert raised.value.kind == "bad_cwd"


async def test_non_executable_file_is_permission_denied(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    cli = fake_cli(tmp_path, "echo", ECHO)
    cli.chmod(0o644)
    with pytest.raises(SpawnError) as raised:
        await runner.spawn(spec_for(cli))
    assert raised.value.kind == "permission_denied"


def test_child_environment_keeps_only_allowed_names() -> None:
    parent = {
        "PATH": "/usr/bin",
        "https_proxy": "http://proxy:3128",
        "ANTHROPIC_API_KEY": "sk-test",
        "GATEWAY_SERVER__TOKEN": "gateway-token",
        "OPENAI_API_KEY": "not-passed-through",
    }
    env = child_environment(
        parent, passthrough=["ANTHROPIC_API_KEY", "ABSENT"], overlay={"PATH": "/opt/cli/bin"}
    )
    assert env == {
        "PATH": "/opt/cli/bin",
        "https_proxy": "http://proxy:3128",
        "ANTHROPIC_API_KEY": "sk-test",
    }
    assert {"HOME", "LC_ALL", "XDG_STATE_HOME", "NODE_EXTRA_CA_CERTS", "no_proxy"} <= BASE_ALLOWED


async def test_gateway_secrets_never_reach_the_child(runner: ProcessRunner, tmp_path: Path) -> None:
    parent = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-test",
        "GATEWAY_SERVER__TOKEN": "gateway-token",
        "GATEWAY_STORAGE__URL": "postgresql://user:pw@db/gateway",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "PYTHONPATH": "/elsewhere",
    }
    env = child_environment(
        parent, passthrough=["ANTHROPIC_API_KEY"], overlay={"CLAUDE_CONFIG_DIR": "/cfg"}
    )
    dump = "import json, os; print(json.dumps(dict(os.environ)))"
    cli = fake_cli(tmp_path, "dump-env", dump)
    process = await runner.spawn(ProcessSpec(argv=(str(cli),), cwd=tmp_path, env=env))
    [line] = await read_all(process)
    assert json.loads(line) == {
        "PATH": parent["PATH"],
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-test",
        "CLAUDE_CONFIG_DIR": "/cfg",
        TAG_ENV: process.tag,
    }
    for secret in ("gateway-token", "postgresql://", "aws-secret"):
        assert secret.encode() not in line


async def test_stop_kills_a_child_that_ignores_sigterm(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "stubborn", IGNORES_SIGTERM)))
    assert await process.read_line() == b"ready"
    started = time.monotonic()
    assert await process.stop(grace_s=0.2, term_s=0.2) == -9
    assert time.monotonic() - started < 3.0
    assert live_group_members(process.pid) == []


async def test_stop_kills_grandchildren_in_the_group_after_a_clean_exit(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    body = """
    sleep 1000 &
    echo "$!"
    read -r _
    exit 0
    """
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "forks", body, interpreter=SH)))
    grandchild = int(await process.read_line() or b"")
    assert grandchild in live_group_members(process.pid)

    assert await process.stop(grace_s=5.0) == 0  # stdin EOF ends the shell, not a signal
    # The grandchild held stdout open; stop() released it anyway.
    assert await process.read_line() is None
    async with asyncio.timeout(5):
        await process_gone(grandchild)  # SIGKILL was sent; its delivery is asynchronous
    assert live_group_members(process.pid) == []


async def test_stop_is_idempotent(runner: ProcessRunner, tmp_path: Path) -> None:
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "stubborn", IGNORES_SIGTERM)))
    assert await process.read_line() == b"ready"
    first, second = await asyncio.gather(
        process.stop(grace_s=0.1, term_s=0.1), process.stop(grace_s=0.1, term_s=0.1)
    )
    assert first == second == -9
    assert await process.stop() == -9
    await process.signal_group(signal.SIGTERM)  # a no-op once stopped
    await process.close_stdin()


async def test_write_line_after_exit_raises_process_error(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "fails", "exit 3", interpreter=SH)))
    async with asyncio.timeout(5):
        assert await process.wait() == 3
    assert process.returncode == 3
    with pytest.raises(ProcessError):
        await process.write_line(b"too late")


async def test_write_line_after_close_stdin_raises_process_error(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "echo", ECHO)))
    with pytest.raises(ValueError, match="newline"):
        await process.write_line(b"two\nlines")
    await process.close_stdin()
    await process.close_stdin()
    with pytest.raises(ProcessError):
        await process.write_line(b"nobody listens")
    async with asyncio.timeout(5):
        assert await process.wait() == 0


async def test_a_write_blocked_on_a_full_pipe_fails_when_the_child_stops(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    body = """
    import time
    print("ready", flush=True)
    time.sleep(1000)
    """
    process = await runner.spawn(spec_for(fake_cli(tmp_path, "deaf", body)))
    assert await process.read_line() == b"ready"
    writer = asyncio.create_task(process.write_line(b"x" * 4_000_000))  # far over a pipe buffer
    await asyncio.sleep(0)  # let the writer run up to its drain; it cannot finish without a reader
    assert not writer.done()
    assert await process.stop(grace_s=0.1, term_s=2.0) == -15
    async with asyncio.timeout(5):
        with pytest.raises(ProcessError):
            await writer


async def test_stderr_tail_keeps_only_the_last_bytes(runner: ProcessRunner, tmp_path: Path) -> None:
    body = 'import sys; sys.stderr.write("a" * 100_000 + "END"); sys.exit(2)'
    cli = fake_cli(tmp_path, "noisy", body)
    process = await runner.spawn(spec_for(cli, stderr_tail_bytes=1024))
    async with asyncio.timeout(5):
        assert await process.wait() == 2
    assert len(process.stderr_tail) == 1024
    assert process.stderr_tail.endswith("aaaEND")


async def test_aclose_stops_every_child_and_refuses_new_spawns(tmp_path: Path) -> None:
    runner = ProcessRunner()
    stubborn = await runner.spawn(spec_for(fake_cli(tmp_path, "stubborn", IGNORES_SIGTERM)))
    assert await stubborn.read_line() == b"ready"
    echo = await runner.spawn(spec_for(fake_cli(tmp_path, "echo", ECHO)))
    sleeper = await runner.spawn(spec_for(Path("/bin/sleep"), "1000"))
    assert list(runner.live) == [stubborn, echo, sleeper]
    assert runner.spawn_count == 3

    started = time.monotonic()
    await runner.aclose(grace_s=0.2)
    assert time.monotonic() - started < 3.0
    assert runner.live == ()
    assert (stubborn.returncode, echo.returncode, sleeper.returncode) == (-9, 0, -15)
    with pytest.raises(ProcessError):
        await runner.spawn(spec_for(Path("/bin/sleep"), "1000"))


async def test_r16_many_spawns_at_once_leave_the_loop_free_between_them(tmp_path: Path) -> None:
    """A burst of spawns must not hold the loop for the whole burst: each fork and exec is
    synchronous, so they take turns and the loop runs other work between two of them.

    Counted in loop iterations, not milliseconds: a probe task that yields once per iteration
    ticks between spawns only if the loop is free between them.
    """
    runner = ProcessRunner()
    spec = ProcessSpec(argv=("/bin/sleep", "30"), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    ticks = 0
    storm_over = False

    async def probe() -> None:
        nonlocal ticks
        while not storm_over:
            ticks += 1
            await asyncio.sleep(0)

    probing = asyncio.create_task(probe())
    await asyncio.sleep(0)
    ticks = 0
    try:
        children = await asyncio.gather(*(runner.spawn(spec) for _ in range(50)))
        storm_over = True
        await probing
        assert len({child.pid for child in children}) == 50
        # One iteration or more between consecutive spawns (held for the whole burst: ~1).
        assert ticks >= 49, f"the loop ran only {ticks} iterations during 50 spawns"
    finally:
        storm_over = True
        await runner.aclose(grace_s=0.1)
