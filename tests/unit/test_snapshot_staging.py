"""The snapshot store's records after the first, which hash only what changed since: each
holds what a fresh ``git add --all`` of the same workspace holds, the cap still refuses a
workspace that grew past it, and a Git command that overruns or whose caller leaves is
killed."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from app.process.snapshots import NOW, GitError, SnapshotStore, TooLarge
from app.process.snapshots.store import turn_ref
from tests.gateway import wait_until

SESSION = "ses_test"
ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def add_all(store: SnapshotStore, workspace: Path, reference: Path) -> str:
    """The tree plain ``git add --all`` makes of ``workspace`` in ``reference``, a Git
    directory of its own with the store's configuration and attributes, staged the same
    way at every step (what the store did before it hashed only what changed)."""
    if not reference.exists():
        subprocess.run(["git", "init", "-q", "--bare", str(reference)], check=True, env=ENV)
        for name in ("config", "info/attributes"):
            shutil.copyfile(store.path(SESSION) / name, reference / name)
    env = {**ENV, "GIT_DIR": str(reference), "GIT_WORK_TREE": str(workspace)}
    for args in (["add", "--all"], ["write-tree"]):
        done = subprocess.run(
            ["git", *args], cwd=workspace, env=env, capture_output=True, check=False
        )
        assert done.returncode == 0, done.stderr
    return done.stdout.decode().strip()


def ls_tree(store: SnapshotStore, tree: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(store.path(SESSION)), "ls-tree", "-r", "--name-only", tree],
        capture_output=True,
        check=True,
    ).stdout.decode()


def objects(store: SnapshotStore) -> int:
    return sum(1 for p in (store.path(SESSION) / "objects").rglob("*") if p.is_file())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("a = 1\n")
    (ws / "src" / "b.py").write_text("b = 2\n")
    (ws / "dir").mkdir()
    (ws / "dir" / "inside.txt").write_text("inside\n")
    (ws / "plain").write_text("plain\n")
    (ws / "tool.sh").write_text("#!/bin/sh\n")
    (ws / "link").symlink_to("plain")
    (ws / ".gitignore").write_text("*.tmp\n")
    return ws


@pytest.fixture
def store(tmp_path: Path) -> SnapshotStore:
    return SnapshotStore(tmp_path / "snapshots")


def edit(ws: Path) -> None:
    (ws / "src" / "a.py").write_text("a = 2\n")  # same size, same second
    (ws / "tool.sh").chmod(0o755)
    (ws / "link").unlink()
    (ws / "link").symlink_to("src/b.py")
    os.utime(ws / "src" / "b.py", ns=(1, 1))  # touched only


def swap_files_and_directories(ws: Path) -> None:
    shutil.rmtree(ws / "dir")
    (ws / "dir").write_text("a file now\n")
    (ws / "plain").unlink()
    (ws / "plain").mkdir()
    (ws / "plain" / "deep.txt").write_text("a directory now\n")


def ignore_more(ws: Path) -> None:
    """A file recorded before and now ignored stays recorded, as Git keeps it tracked."""
    (ws / "scratch.tmp").write_text("ignored\n")
    (ws / "src" / "b.py").unlink()
    (ws / ".gitignore").write_text("*.py\n")
    (ws / "src" / "c.py").write_text("ignored now\n")


async def test_each_record_holds_what_a_fresh_git_add_all_holds(
    store: SnapshotStore, workspace: Path, tmp_path: Path
) -> None:
    reference = tmp_path / "reference"
    for n, change in enumerate((None, edit, swap_files_and_directories, ignore_more)):
        if change is not None:
            change(workspace)
        tree = await store.record(SESSION, workspace, turn_ref(f"trn_{n}", "start"))
        assert tree == await asyncio.to_thread(add_all, store, workspace, reference), change

    unchanged = await store.record(SESSION, workspace, turn_ref("trn_9", "start"))
    assert unchanged == tree
    assert await store.resolve(SESSION, turn_ref("trn_9", "start")) == tree
    assert (await store.changes(SESSION, workspace, tree, unchanged)).files == ()


async def test_a_nested_repository_stays_out_of_every_record(
    store: SnapshotStore, workspace: Path
) -> None:
    nested = workspace / "vendor"
    nested.mkdir()
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q"], cwd=nested, check=True, env=ENV)
    (nested / "lib.c").write_text("int x;\n")

    trees = [await store.record(SESSION, workspace, turn_ref(f"trn_{n}", "end")) for n in (1, 2)]
    (workspace / "plain").write_text("changed\n")
    trees.append(await store.record(SESSION, workspace, turn_ref("trn_3", "end")))

    for tree in trees:
        listed = await asyncio.to_thread(ls_tree, store, tree)
        assert "plain" in listed
        assert "vendor" not in listed


async def test_a_workspace_that_grew_past_the_cap_is_refused_with_nothing_added(
    tmp_path: Path, workspace: Path
) -> None:
    store = SnapshotStore(tmp_path / "snapshots", max_files=20, max_bytes=10_000)
    await store.record(SESSION, workspace, turn_ref("trn_1", "start"))
    before = objects(store)
    for i in range(15):
        (workspace / f"new{i}.txt").write_text(f"new {i}\n")

    with pytest.raises(TooLarge, match=r"snapshots\.max_files") as refused:
        await store.record(SESSION, workspace, turn_ref("trn_1", "end"))

    assert refused.value.size.files > 20
    assert objects(store) == before
    assert await store.resolve(SESSION, turn_ref("trn_1", "end")) is None
    for i in range(10):
        (workspace / f"new{i}.txt").unlink()
    (workspace / "big.bin").write_bytes(b"x" * 10_000)
    with pytest.raises(TooLarge, match=r"snapshots\.max_bytes"):
        await store.record(SESSION, workspace, turn_ref("trn_2", "start"))
    (workspace / "big.bin").unlink()
    assert await store.record(SESSION, workspace, turn_ref("trn_2", "start"))


async def test_a_state_recorded_before_is_kept(store: SnapshotStore, workspace: Path) -> None:
    ref = turn_ref("trn_1", "start")
    first = await store.record(SESSION, workspace, ref, keep=True)
    (workspace / "plain").write_text("changed since\n")

    assert await store.record(SESSION, workspace, ref, keep=True) == first
    assert await store.resolve(SESSION, ref) == first
    assert await store.record(SESSION, workspace, ref) != first


async def test_a_record_made_by_another_store_on_the_same_directory_is_seen(
    tmp_path: Path, workspace: Path
) -> None:
    """Two replicas sharing ``snapshots.dir``: what one keeps in memory does not hide what
    the other recorded."""
    here = SnapshotStore(tmp_path / "shared")
    there = SnapshotStore(tmp_path / "shared")
    await here.record(SESSION, workspace, turn_ref("trn_1", "start"))
    (workspace / "plain").write_text("changed there\n")
    changed = await there.record(SESSION, workspace, turn_ref("trn_1", "end"))

    assert await here.record(SESSION, workspace, turn_ref("trn_2", "start")) == changed


@pytest.fixture
def slow_git(tmp_path: Path) -> Path:
    """A ``git`` whose ``diff-files`` hangs (writing its pid to ``$HOME/pid`` first);
    every other command is Git's own."""
    script = tmp_path / "slow-git"
    real = shutil.which("git")
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = diff-files ] && { echo $$ > "$HOME/pid"; exec sleep 60; }; '
        "done\n"
        f'exec {real} "$@"\n'
    )
    script.chmod(0o755)
    return script


def gone(pid: int) -> bool:
    """No such process (killed and reaped: the store waits for every child)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_git_command_over_its_time_is_killed(
    tmp_path: Path, workspace: Path, slow_git: Path
) -> None:
    store = SnapshotStore(tmp_path / "snapshots", git=str(slow_git), timeout_s=0.5)

    with pytest.raises(GitError, match=r"took longer than 0.5 s \(snapshots.timeout_s\)"):
        await store.record(SESSION, workspace, turn_ref("trn_1", "start"))

    assert gone(int((tmp_path / "snapshots" / "pid").read_text()))


async def test_a_record_whose_caller_leaves_kills_its_git_and_frees_the_session(
    tmp_path: Path, workspace: Path, slow_git: Path
) -> None:
    root = tmp_path / "snapshots"
    store = SnapshotStore(root, git=str(slow_git))
    recording = asyncio.create_task(store.record(SESSION, workspace, turn_ref("trn_1", "start")))
    pid_file = root / "pid"
    await asyncio.to_thread(
        wait_until, lambda: pid_file.exists() and pid_file.read_text().strip(), 10, "git started"
    )

    recording.cancel()
    with pytest.raises(asyncio.CancelledError):
        await recording

    assert gone(int((root / "pid").read_text()))
    store.git = shutil.which("git") or "git"
    async with asyncio.timeout(10):  # the session's lock was released
        await store.record(SESSION, workspace, turn_ref("trn_1", "start"))


async def test_what_changed_up_to_now_is_read_without_writing_the_sessions_index(
    store: SnapshotStore, workspace: Path
) -> None:
    """A read may reach any replica while the one running the session records: it stages in
    a copy of the index, never the index itself."""
    start = await store.record(SESSION, workspace, turn_ref("trn_1", "start"))
    index = store.path(SESSION) / "index"
    before = index.read_bytes()
    (workspace / "plain").write_text("changed since\n")

    changes = await store.changes(SESSION, workspace, start, NOW)

    assert [(c.path, c.status) for c in changes.files] == [("plain", "modified")]
    assert index.read_bytes() == before
    assert sorted(p.name for p in store.path(SESSION).glob("index*")) == ["index"]
    end = await store.record(SESSION, workspace, turn_ref("trn_1", "end"))
    assert (await store.changes(SESSION, workspace, start, end)) == changes
