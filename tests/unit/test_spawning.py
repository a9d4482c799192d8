"""``start_child``: a vfork'd child behind a ``SubprocessTransport``, on both event loops.

The protocol must see what the loop's own ``subprocess_exec`` shows it, in the same order:
``connection_made`` first, pipe data and pipe losses, ``process_exited``, and
``connection_lost`` last, once the child has exited and every pipe is closed.
"""

from __future__ import annotations

import asyncio
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import cast

import pytest
import uvloop

from app.process import spawning
from app.process.spawning import start_child

pytestmark = pytest.mark.uvloop

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


class Recorder(asyncio.SubprocessProtocol):
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.output: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
        self.done = asyncio.Event()
        self.transport: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.calls.append(("connection_made",))

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.output[fd] += data

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.calls.append(("pipe_lost", fd))

    def process_exited(self) -> None:
        self.calls.append(("exited",))

    def connection_lost(self, exc: Exception | None) -> None:
        self.calls.append(("connection_lost",))
        self.done.set()


def reaped(pid: int) -> bool:
    """No zombie is left behind: the child is no longer ours to wait for."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.fixture(params=["vfork", "loop"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways to start a child: ours, and the loop's own where pidfds are missing."""
    if request.param == "loop":
        monkeypatch.setattr(spawning, "PIDFD_USABLE", False)
    return str(request.param)


async def test_the_protocol_sees_output_exit_and_the_end_in_order(way: str, tmp_path: Path) -> None:
    protocol = Recorder()
    script = 'read line; echo "got $line"; echo oops >&2; pwd; exit 3'
    transport = await start_child(lambda: protocol, ["sh", "-c", script], cwd=tmp_path, env=ENV)
    assert protocol.calls[0] == ("connection_made",)
    # uvloop's transports are not registered with asyncio's ABCs: no isinstance checks.
    stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
    stdin.write(b"hello\n")
    async with asyncio.timeout(10):
        await protocol.done.wait()
    transport.close()
    assert bytes(protocol.output[1]) == f"got hello\n{tmp_path}\n".encode()
    assert bytes(protocol.output[2]) == b"oops\n"
    assert transport.get_returncode() == 3
    assert protocol.calls[-1] == ("connection_lost",)
    assert protocol.calls.index(("exited",)) < len(protocol.calls) - 1
    assert {c for c in protocol.calls if c[0] == "pipe_lost"} == {
        ("pipe_lost", 0),
        ("pipe_lost", 1),
        ("pipe_lost", 2),
    }
    assert transport.get_pid() > 0
    assert reaped(transport.get_pid())


async def test_a_signal_ends_the_child_and_the_return_code_says_which(
    way: str, tmp_path: Path
) -> None:
    protocol = Recorder()
    transport = await start_child(lambda: protocol, ["sleep", "30"], cwd=tmp_path, env=ENV)
    assert os.getpgid(transport.get_pid()) == transport.get_pid()  # a session of its own
    transport.send_signal(signal.SIGTERM)
    async with asyncio.timeout(10):
        await protocol.done.wait()
    transport.close()
    assert transport.get_returncode() == -signal.SIGTERM


async def test_closing_a_running_child_kills_and_reaps_it(way: str, tmp_path: Path) -> None:
    protocol = Recorder()
    transport = await start_child(lambda: protocol, ["sleep", "30"], cwd=tmp_path, env=ENV)
    transport.close()
    async with asyncio.timeout(10):
        await protocol.done.wait()
    assert transport.get_returncode() == -signal.SIGKILL
    assert reaped(transport.get_pid())


async def test_a_missing_executable_raises_before_anything_runs(way: str, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await start_child(Recorder, [str(tmp_path / "missing")], cwd=tmp_path, env=ENV)
    with pytest.raises(FileNotFoundError):
        await start_child(Recorder, ["true"], cwd=tmp_path / "nowhere", env=ENV)


def children_running(token: str) -> list[int]:
    """Pids of this process's children whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == os.getpid() and token.encode() in cmdline:
            found.append(int(entry.name))
    return found


async def test_a_start_cancelled_half_way_leaves_no_child(tmp_path: Path) -> None:
    token = "30.271828"  # sleep's argument names this test's child
    with ThreadPoolExecutor(max_workers=1) as executor:
        task = asyncio.create_task(
            start_child(Recorder, ["sleep", token], cwd=tmp_path, env=ENV, executor=executor)
        )
        await asyncio.sleep(0)  # one step: the start is handed to the executor
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The executor runs one call at a time: once this one ran, the start had returned
        # (the child had exec'd) and nobody owns its child.
        await asyncio.get_running_loop().run_in_executor(executor, lambda: None)
    async with asyncio.timeout(10):
        # Killed and reaped by the gateway, not by this test: polled, bounded.
        while children_running(token):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_each_pipe_descriptor_is_closed_by_exactly_one_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvloop gives the descriptor to libuv, which closes it, then closes the file object
    too: a second close there would hit whatever another thread opened meanwhile under the
    same number (a soak saw SQLite's database and a child's pipes closed so). Python code
    closes the ends only on asyncio's loop, once each."""
    on_uvloop = isinstance(asyncio.get_running_loop(), uvloop.Loop)
    closed: list[int] = []
    real_close = os.close

    def close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    protocol = Recorder()
    # cat runs until its stdin closes: nothing ends before the closes are watched.
    transport = await start_child(lambda: protocol, ["cat"], cwd=tmp_path, env=ENV)
    pipes = [transport.get_pipe_transport(fd) for fd in (0, 1, 2)]
    ends = [pipe.get_extra_info("pipe").fileno() for pipe in pipes if pipe is not None]
    monkeypatch.setattr(os, "close", close)
    stdin = pipes[0]
    assert stdin is not None
    stdin.close()
    async with asyncio.timeout(10):
        await protocol.done.wait()
    transport.close()
    monkeypatch.undo()
    by_python = [fd for fd in closed if fd in ends]
    assert sorted(by_python) == ([] if on_uvloop else sorted(ends))
    for fd in ends:  # closed by someone: none is left open
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(fd)
