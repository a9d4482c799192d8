"""Running Git for the snapshot store: argv only (never a shell), an environment built from
nothing (no ``GIT_*`` of the gateway's, no system or user configuration, no hooks, a fixed
identity), every run bounded in time and its process group killed when it overruns or its
caller goes away.

Git runs here as short-lived helper processes of the gateway itself, outside any sandbox:
they are not agent CLIs, so they are neither in the process runner's ledger nor under its
per-CLI limits (app/process/runner.py), but every one is waited for before its call returns.

A store's work runs on a worker thread, never on the event loop's (``off_loop``): the
commands are started there with ``subprocess.Popen``, which uses ``vfork`` and ``exec`` (its
cost does not grow with the gateway's memory, and the loop is not stopped while the child
starts, as it is for uvloop's ``fork``), and their output is read and their exit waited for
there too. Unlike the agent CLIs (app/process/spawning.py) they carry no parent-death signal:
arming one costs an interpreter start per command, more than most of these commands take, and
a Git command left behind by a killed gateway ends on its own (it only reads the workspace and
writes the gateway's own store).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

IDENTITY = {
    "GIT_AUTHOR_NAME": "Agent Gateway",
    "GIT_AUTHOR_EMAIL": "snapshots@agent-gateway.invalid",
    "GIT_COMMITTER_NAME": "Agent Gateway",
    "GIT_COMMITTER_EMAIL": "snapshots@agent-gateway.invalid",
}
T = TypeVar("T")
STDERR_TAIL = 2000
"""What of a failed command's stderr its error keeps."""


class GitError(Exception):
    """A Git command of the snapshot store failed or overran its time."""

    def __init__(self, detail: str, *, returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.returncode = returncode
        self.stderr = stderr


class GitUnavailable(GitError):
    """The Git executable is missing or cannot be run."""


class Stop:
    """Asks a store operation running on a worker thread to end: the Git command running
    now is killed with its group, and no other starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False
        self._running: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._running is not None:
                _kill(self._running)

    @contextlib.contextmanager
    def watching(self, process: subprocess.Popen[bytes]) -> Iterator[None]:
        with self._lock:
            if self._stopped:
                _kill(process)
            self._running = process
        try:
            yield
        finally:
            with self._lock:
                self._running = None

    @property
    def stopped(self) -> bool:
        return self._stopped


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


async def off_loop(work: Callable[[Stop], T]) -> T:
    """``work(stop)`` on a worker thread; its result. A caller that goes away stops it (its
    running Git command killed) and still waits for it to end, so a store operation never
    outlives the call that started it."""
    stop = Stop()
    done = asyncio.get_running_loop().run_in_executor(None, work, stop)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        stop.stop()
        await asyncio.wait([done])  # bounded: the command running is killed
        raise


@dataclass(frozen=True, kw_only=True)
class Git:
    """One store's way of running Git: its directory, its work tree and its index. Its
    methods block: call them from ``off_loop``'s work."""

    executable: str
    git_dir: Path
    work_tree: Path | None = None
    index: Path | None = None
    home: Path
    """``HOME`` for Git: the snapshot root, never the operator's home."""
    excludes: Path | None = None
    """The workspace repository's own ``info/exclude``, honoured like its ``.gitignore``."""
    timeout_s: float = 120.0
    stop: Stop | None = None

    def environment(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.home),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_DIR": str(self.git_dir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_REPLACE_OBJECTS": "1",
            **IDENTITY,
        }
        if self.work_tree is not None:
            env["GIT_WORK_TREE"] = str(self.work_tree)
        if self.index is not None:
            env["GIT_INDEX_FILE"] = str(self.index)
        return env

    def argv(self, *args: str) -> list[str]:
        # The excludes file is a per-workspace choice, so it is given per command.
        excludes = str(self.excludes) if self.excludes is not None else os.devnull
        return [self.executable, "-c", f"core.excludesFile={excludes}", *args]

    def run(self, *args: str, input: bytes | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
        """Run ``git args…``; its stdout. Raises ``GitError`` on another exit code."""
        with self._started(args, stdin=input is not None) as process:
            try:
                out, err = process.communicate(input, timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                raise self._overran(args) from None
        if process.returncode not in ok:
            raise self._failed(args, process.returncode, err)
        return out

    @contextlib.contextmanager
    def stream(self, *args: str) -> Iterator[IO[bytes]]:
        """Run ``git args…`` and read its stdout as it comes; leaving early kills it. The
        whole run is bounded by ``timeout_s`` (a timer kills it then)."""
        with self._started(args, stdin=False, stderr=False) as process:
            assert process.stdout is not None
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                _kill(process)

            timer = threading.Timer(self.timeout_s, expire)
            timer.daemon = True
            timer.start()
            try:
                yield process.stdout
                process.wait()
            finally:
                timer.cancel()
            if expired.is_set():
                raise self._overran(args)
        if process.returncode != 0:
            raise self._failed(args, process.returncode, b"")

    @contextlib.contextmanager
    def _started(
        self, args: tuple[str, ...], *, stdin: bool, stderr: bool = True
    ) -> Iterator[subprocess.Popen[bytes]]:
        """The running process, killed with its group when the caller leaves first or the
        store operation is stopped; always reaped before this returns."""
        if self.stop is not None and self.stop.stopped:
            raise GitError(f"git {args[0]} not started: the operation was stopped")
        try:
            process = subprocess.Popen(  # noqa: S603 - argv of our own, no shell
                self.argv(*args),
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
                env=self.environment(),
                cwd=str(self.work_tree or self.home),
                start_new_session=True,
            )
        except OSError as exc:
            raise GitUnavailable(f"cannot run {self.executable}: {exc}") from None
        try:
            with self.stop.watching(process) if self.stop else contextlib.nullcontext():
                yield process
        finally:
            _kill(process)
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
            process.wait()

    def _overran(self, args: tuple[str, ...]) -> GitError:
        return GitError(
            f"git {args[0]} took longer than {self.timeout_s:g} s (snapshots.timeout_s)"
        )

    def _failed(self, args: tuple[str, ...], returncode: int, err: bytes) -> GitError:
        if self.stop is not None and self.stop.stopped:
            return GitError(f"git {args[0]} was stopped", returncode=returncode)
        said = err.decode(errors="replace").strip()[-STDERR_TAIL:]
        return GitError(
            f"git {args[0]} failed (exit {returncode}): {said}",
            returncode=returncode,
            stderr=said,
        )


def with_index(git: Git, index: Path) -> Git:
    """``git`` on another index file (a scratch copy, a fresh one)."""
    return Git(
        executable=git.executable,
        git_dir=git.git_dir,
        work_tree=git.work_tree,
        index=index,
        home=git.home,
        excludes=git.excludes,
        timeout_s=git.timeout_s,
        stop=git.stop,
    )


def repository_excludes(workspace: Path) -> Path | None:
    """The ``info/exclude`` of the repository ``workspace`` is the top of, if it has one
    (a ``.git`` directory, or a ``.git`` file naming a worktree's directory)."""
    dot_git = workspace / ".git"
    if dot_git.is_dir():
        found = dot_git / "info" / "exclude"
        return found if found.is_file() else None
    try:
        first = dot_git.read_text(errors="replace").splitlines()[0] if dot_git.is_file() else ""
    except (OSError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    git_dir = Path(first.removeprefix("gitdir:").strip())
    if not git_dir.is_absolute():
        git_dir = workspace / git_dir
    try:
        common = (git_dir / "commondir").read_text().strip()
        git_dir = git_dir / common if not Path(common).is_absolute() else Path(common)
    except OSError:
        pass
    found = git_dir / "info" / "exclude"
    return found if found.is_file() else None
