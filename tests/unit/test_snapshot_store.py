"""The snapshot store against real Git, in temporary directories: what it records, what it
leaves alone (the user's repository, ignored files), and that a restore and a patch give back
the exact bytes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from app.process.snapshots import NOW, SnapshotStore, TooLarge, git_problem
from app.process.snapshots.diffs import FileChange, parse_name_status, parse_numstat
from app.process.snapshots.store import turn_ref

SESSION = "ses_test"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        check=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return done.stdout.decode()


def ls_tree(store: SnapshotStore, commit: str) -> str:
    """The paths (and modes) recorded in ``commit``."""
    return subprocess.run(
        ["git", "--git-dir", str(store.path(SESSION)), "ls-tree", "-r", commit],
        capture_output=True,
        check=True,
    ).stdout.decode()


def apply(patch: bytes, base: Path) -> None:
    subprocess.run(["git", "apply", "--binary", "-"], cwd=base, input=patch, check=True)


def files_of(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``directory`` but the ``.git`` directory: its bytes (a symlink: its
    target) and its mode."""
    found = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if relative.parts[0] == ".git" or (path.is_dir() and not path.is_symlink()):
            continue
        st = path.lstat()
        content = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        found[str(relative)] = (content, st.st_mode & 0o170111)
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A Git repository with a commit, staged and unstaged work, ignored files, CRLF text
    under ``text=auto``, an executable, a symlink and a binary file."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / "readme.md").write_text("one\ntwo\nthree\n")
    (ws / ".gitignore").write_text("*.log\nbuild/\n")
    (ws / ".gitattributes").write_text("* text=auto\n")
    (ws / "dos.txt").write_bytes(b"x\r\ny\r\n")
    (ws / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (ws / "run.sh").chmod(0o755)
    (ws / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (ws / "link").symlink_to("readme.md")
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("print('a')\n")
    (ws / "debug.log").write_text("ignored\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.o").write_bytes(b"\0" * 100)
    git(ws, "add", "readme.md")
    git(ws, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    (ws / "readme.md").write_text("one\ntwo\nthree\nfour\n")
    git(ws, "add", "readme.md")
    return ws


@pytest.fixture
def store(tmp_path: Path) -> SnapshotStore:
    return SnapshotStore(tmp_path / "snapshots")


def change_turn(ws: Path) -> None:
    """What an agent's turn does: edit, add, delete, rename, change a binary and a mode."""
    (ws / "src" / "main.py").write_text("print('b')\nprint('c')\n")
    (ws / "src" / "new.py").write_text("x = 1\ny = 2\nz = 3\n")
    (ws / "readme.md").unlink()
    (ws / "dos.txt").rename(ws / "dos2.txt")
    (ws / "blob.bin").write_bytes(b"\0\1\2" * 10)
    (ws / "run.sh").chmod(0o644)
    (ws / "other.log").write_text("still ignored\n")


async def test_changes_list_each_file_with_its_status_and_line_counts(
    store: SnapshotStore, workspace: Path
) -> None:
    start = await store.record(SESSION, workspace, turn_ref("trn_1", "start"))
    change_turn(workspace)
    end = await store.record(SESSION, workspace, turn_ref("trn_1", "end"))

    changes = await store.changes(SESSION, workspace, start, end)

    assert changes.files == (
        FileChange(path="blob.bin", status="modified", binary=True),
        FileChange(path="dos2.txt", status="renamed", old_path="dos.txt"),
        FileChange(path="readme.md", status="deleted", deletions=4),
        FileChange(path="run.sh", status="modified"),
        FileChange(path="src/main.py", status="modified", additions=2, deletions=1),
        FileChange(path="src/new.py", status="added", additions=3),
    )
    assert (changes.additions, changes.deletions) == (5, 5)
    assert await store.changes(SESSION, workspace, start, NOW) == changes
    assert await store.resolve(SESSION, turn_ref("trn_1", "end")) == end
    assert await store.resolve(SESSION, turn_ref("trn_2", "end")) is None


async def test_the_users_repository_index_and_config_are_left_alone(
    store: SnapshotStore, workspace: Path
) -> None:
    dot_git = workspace / ".git"
    before = {p: p.read_bytes() for p in dot_git.rglob("*") if p.is_file()}
    status = git(workspace, "status", "--porcelain")

    start = await store.record(SESSION, workspace, turn_ref("trn_1", "start"))
    change_turn(workspace)
    await store.record(SESSION, workspace, turn_ref("trn_1", "end"))
    await store.restore(SESSION, workspace, start)

    assert {p: p.read_bytes() for p in dot_git.rglob("*") if p.is_file()} == before
    assert git(workspace, "status", "--porcelain") == status
    recorded = ls_tree(store, start)
    assert ".git/" not in recorded
    assert "debug.log" not in recorded
    assert "build/" not in recorded
    assert not (store.path(SESSION) / "hooks").exists()


async def test_restore_gives_back_exact_bytes_and_modes_and_leaves_ignored_files(
    store: SnapshotStore, workspace: Path
) -> None:
    expected = files_of(workspace)
    start = await store.record(SESSION, workspace, turn_ref("trn_1", "start"))
    change_turn(workspace)
    (workspace / "fresh").mkdir()
    (workspace / "fresh" / "deep.txt").write_text("added later\n")

    reverted = await store.restore(SESSION, workspace, start)

    after = files_of(workspace)
    assert after.pop("other.log") == (b"still ignored\n", 0o100000)
    assert after == expected
    assert not (workspace / "fresh").exists()
    assert {(c.path, c.status) for c in reverted.files} >= {
        ("fresh/deep.txt", "deleted"),
        ("readme.md", "added"),
        ("src/new.py", "deleted"),
    }


async def test_a_patch_applies_on_the_base_and_reproduces_the_target(
    store: SnapshotStore, workspace: Path, tmp_path: Path
) -> None:
    start = await store.record(SESSION, workspace, turn_ref("trn_1", "start"))
    base = tmp_path / "base"
    await store.materialize(SESSION, start, base)
    change_turn(workspace)
    end = await store.record(SESSION, workspace, turn_ref("trn_1", "end"))
    patch = await store.patch(SESSION, workspace, start, end, binary=True)

    apply(patch, base)

    target = files_of(workspace)
    for ignored in ("debug.log", "other.log", "build/out.o"):
        target.pop(ignored)
    assert files_of(base) == target


async def test_a_nested_repository_and_the_repositorys_own_excludes(
    store: SnapshotStore, workspace: Path
) -> None:
    nested = workspace / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "lib.c").write_text("int x;\n")
    (workspace / ".git" / "info").mkdir(exist_ok=True)
    (workspace / ".git" / "info" / "exclude").write_text("secret.env\n")
    (workspace / "secret.env").write_text("TOKEN=1\n")

    commit = await store.record(SESSION, workspace, turn_ref("trn_1", "start"))

    listed = ls_tree(store, commit)
    assert "secret.env" not in listed
    assert "vendor/lib" not in listed


async def test_a_workspace_over_a_cap_is_refused_before_anything_is_added(
    tmp_path: Path, workspace: Path
) -> None:
    for i in range(30):
        (workspace / f"f{i}.txt").write_text("0123456789" * 10)
    few_files = SnapshotStore(tmp_path / "a", max_files=20)
    few_bytes = SnapshotStore(tmp_path / "b", max_bytes=2000)

    with pytest.raises(TooLarge, match=r"more than 20 files \(snapshots.max_files\)") as files:
        await few_files.record(SESSION, workspace, turn_ref("trn_1", "start"))
    with pytest.raises(TooLarge, match=r"more than 2000 bytes .*snapshots.max_bytes"):
        await few_bytes.record(SESSION, workspace, turn_ref("trn_1", "start"))

    assert files.value.size.files > 20
    assert await few_files.resolve(SESSION, turn_ref("trn_1", "start")) is None
    objects = few_files.path(SESSION) / "objects"
    assert not [p for p in objects.rglob("*") if p.is_file()]
    assert (await SnapshotStore(tmp_path / "c").measure(workspace)).complete


async def test_notes_are_taken_once_and_forget_removes_the_record(
    store: SnapshotStore, workspace: Path
) -> None:
    await store.record(SESSION, workspace, turn_ref("trn_1", "start"))
    store.add_note(SESSION, "first")
    store.add_note(SESSION, "second")

    assert store.take_notes(SESSION) == "first\n\nsecond"
    assert store.take_notes(SESSION) is None
    assert store.forget([SESSION, "ses_never", "../escape"]) == 1
    assert not store.path(SESSION).exists()


async def test_git_problem_names_a_missing_git(tmp_path: Path) -> None:
    assert await git_problem("git") is None
    assert "not installed" in (await git_problem(str(tmp_path / "no-git")) or "")


def test_listings_with_renames_and_binaries_parse() -> None:
    statuses = b"M\0a.txt\0R087\0old name.txt\0new name.txt\0D\0gone\0"
    counts = b"1\t2\ta.txt\0" + b"3\t0\t\0old name.txt\0new name.txt\0" + b"-\t-\tgone\0"

    assert parse_name_status(statuses) == [
        ("modified", "a.txt", None),
        ("renamed", "new name.txt", "old name.txt"),
        ("deleted", "gone", None),
    ]
    assert parse_numstat(counts) == {
        "a.txt": (1, 2, False),
        "new name.txt": (3, 0, False),
        "gone": (0, 0, True),
    }


def test_git_is_on_path() -> None:
    assert shutil.which("git"), "the snapshot store needs git (scripts/system-packages.sh git)"
