"""How memory and process limits are enforced (app/process/bounds.py, app/process/cgroups.py):
the files a cgroup v2 group per child is made of, written into a temporary directory standing
in for the cgroup file system; the choice of mechanism; how an exit is judged; and the exec
shim joining the group and setting its rlimit before the CLI runs (real children)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from app.process.bounds import ChildBounds, Enforcement, EnforcementUnavailable
from app.process.cgroups import CgroupParent, ChildGroup, own_group
from app.process.childspec import LimitExceeded, ProcessLimits, ProcessSpec, child_environment
from app.process.managed import SpawnError
from app.process.runner import ProcessRunner

MIB = 1024 * 1024


def fake_group(path: Path, *, controllers: str = "cpu memory pids", subtree: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup.controllers").write_text(controllers + "\n")
    (path / "cgroup.subtree_control").write_text(subtree + "\n")
    return path


def test_the_own_group_is_found_from_the_cgroup2_mount_and_the_membership(
    tmp_path: Path,
) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "30 1 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "35 1 0:30 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
    )
    membership = tmp_path / "cgroup"
    membership.write_text("4:memory:/x\n0::/system.slice/gateway.service\n")
    assert own_group(mountinfo, membership) == Path(
        "/sys/fs/cgroup/unified/system.slice/gateway.service"
    )
    mountinfo.write_text("30 1 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")
    assert own_group(mountinfo, membership) is None


def test_the_parent_enables_memory_and_pids_and_a_child_group_gets_its_limits(
    tmp_path: Path,
) -> None:
    own = fake_group(tmp_path / "gateway.service")
    fake_group(own / "agent-gateway")  # what the kernel shows in a new group
    parent = CgroupParent.prepare(own)
    assert isinstance(parent, CgroupParent)
    assert parent.path == own / "agent-gateway"
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (parent.path / "cgroup.subtree_control").read_text() == "+memory +pids"

    group = parent.create("123.1", max_memory_bytes=256 * MIB, max_processes=20)
    assert group.path == parent.path / "123.1"
    written = {name: (group.path / name).read_text() for name in os.listdir(group.path)}
    assert written == {
        "memory.max": str(256 * MIB),
        "memory.swap.max": "0",
        "memory.oom.group": "1",
        "pids.max": "20",
    }
    assert group.procs_file == group.path / "cgroup.procs"


def test_controllers_already_enabled_are_not_written_again(tmp_path: Path) -> None:
    own = fake_group(tmp_path / "own", subtree="memory pids")
    fake_group(own / "agent-gateway", subtree="pids memory")
    parent = CgroupParent.prepare(own)
    assert isinstance(parent, CgroupParent)
    assert (own / "cgroup.subtree_control").read_text() == "memory pids\n"
    assert (parent.path / "cgroup.subtree_control").read_text() == "pids memory\n"


def test_no_cgroup_without_the_controllers_says_which_are_missing(tmp_path: Path) -> None:
    own = fake_group(tmp_path / "own", controllers="hugetlb")
    why = CgroupParent.prepare(own)
    assert isinstance(why, str)
    assert "memory and pids controllers" in why
    assert CgroupParent.prepare(None) == "no cgroup v2 hierarchy is mounted"
    assert not (own / "agent-gateway").exists()


def test_the_group_counters_say_which_limit_the_kernel_enforced(tmp_path: Path) -> None:
    group = ChildGroup(path=tmp_path, max_memory_bytes=64 * MIB, max_processes=20)
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 0\n")
    (tmp_path / "pids.events").write_text("max 0\n")
    assert group.breach() is None  # reclaim at memory.max is not a breach

    (tmp_path / "pids.events").write_text("max 3\n")
    (tmp_path / "pids.current").write_text("20\n")
    assert group.breach() == LimitExceeded(reason="process_limit", limit=20, observed=21)

    (tmp_path / "memory.events").write_text("max 12\noom 1\noom_kill 1\n")
    (tmp_path / "memory.peak").write_text(f"{64 * MIB}\n")
    assert group.breach() == LimitExceeded(reason="memory_limit", limit=64 * MIB, observed=64 * MIB)


def test_removing_a_group_writes_cgroup_kill_then_removes_it(tmp_path: Path) -> None:
    path = tmp_path / "child"
    path.mkdir()
    group = ChildGroup(path=path, max_memory_bytes=None, max_processes=None)
    group.kill()  # a kernel without cgroup.kill: nothing is created
    assert not (path / "cgroup.kill").exists()
    (path / "cgroup.kill").write_text("")
    group.kill()
    assert (path / "cgroup.kill").read_text() == "1"
    (path / "cgroup.kill").unlink()  # the kernel's interface files do not stop an rmdir
    group.remove()
    assert not path.exists()
    group.remove()  # already gone: nothing to do


def test_the_mechanisms_follow_limits_enforcement(tmp_path: Path) -> None:
    parent = CgroupParent(path=tmp_path)
    by_cgroup = Enforcement.choose("auto", parent=parent)
    assert (by_cgroup.memory, by_cgroup.processes) == ("cgroup", "cgroup")
    fallback = Enforcement.choose("auto", parent="no cgroup v2 hierarchy is mounted")
    assert (fallback.memory, fallback.processes) == ("rlimit", "watchdog")
    assert "no cgroup v2 hierarchy is mounted" in fallback.detail
    rlimit = Enforcement.choose("rlimit", parent=parent)
    assert (rlimit.memory, rlimit.processes, rlimit.parent) == ("rlimit", "watchdog", None)
    watchdog = Enforcement.choose("watchdog")
    assert (watchdog.memory, watchdog.processes) == ("watchdog", "watchdog")
    with pytest.raises(EnforcementUnavailable, match=r"limits\.enforcement is cgroup but nope"):
        Enforcement.choose("cgroup", parent="nope")


def test_a_failed_exit_near_the_data_rlimit_is_a_memory_limit() -> None:
    bounds = ChildBounds(data_bytes=100 * MIB)
    near, far = 95 * MIB, 50 * MIB
    assert bounds.breach_at_exit(1, near, stopped=False) == LimitExceeded(
        reason="memory_limit", limit=100 * MIB, observed=near
    )
    assert bounds.breach_at_exit(-9, near, stopped=False) is not None
    assert bounds.breach_at_exit(1, far, stopped=False) is None
    assert bounds.breach_at_exit(0, near, stopped=False) is None  # it exited cleanly
    assert bounds.breach_at_exit(-15, near, stopped=True) is None  # the gateway stopped it
    assert ChildBounds().breach_at_exit(1, near, stopped=False) is None


def spec(tmp_path: Path, code: str) -> ProcessSpec:
    env = child_environment(os.environ, passthrough=(), overlay={})
    return ProcessSpec(argv=(sys.executable, "-c", code), cwd=tmp_path, env=env)


async def test_the_child_joins_its_group_and_sets_its_rlimit_before_the_cli_runs(
    tmp_path: Path,
) -> None:
    parent = CgroupParent(path=tmp_path / "groups")
    parent.path.mkdir()
    # A directory standing in for cgroupfs: the shim's pid lands in a plain file.
    enforcement = Enforcement(memory="cgroup", processes="cgroup", detail="test", parent=parent)
    limits = ProcessLimits(max_rss_bytes=512 * MIB, max_processes=50)
    runner = ProcessRunner(limits=limits, enforcement=enforcement)
    try:
        code = "import os; print(os.getpid(), flush=True)"
        child = await runner.spawn(spec(tmp_path, code))
        (group,) = parent.path.iterdir()
        assert (group / "cgroup.procs").read_text() == str(child.pid)
        assert (group / "pids.max").read_text() == "50"
        assert await child.read_line() == str(child.pid).encode()
        for name in os.listdir(group):
            (group / name).unlink()  # the kernel's interface files do not stop an rmdir
        await child.stop(grace_s=5)
        assert not group.exists()  # removed with the child
    finally:
        await runner.aclose(grace_s=0.5)

    rlimited = ProcessRunner(limits=limits, enforcement=Enforcement.choose("rlimit"))
    try:
        code = "import resource; print(resource.getrlimit(resource.RLIMIT_DATA), flush=True)"
        child = await rlimited.spawn(spec(tmp_path, code))
        assert await child.read_line() == str((512 * MIB, 512 * MIB)).encode()
        assert await child.stop(grace_s=5) == 0
    finally:
        await rlimited.aclose(grace_s=0.5)


async def test_a_child_that_cannot_join_its_group_never_runs(tmp_path: Path) -> None:
    parent = CgroupParent(path=tmp_path / "groups")
    parent.path.mkdir()
    enforcement = Enforcement(memory="cgroup", processes="cgroup", detail="test", parent=parent)
    runner = ProcessRunner(limits=ProcessLimits(max_processes=50), enforcement=enforcement)
    marker = tmp_path / "ran"
    original = CgroupParent.create

    def create_unjoinable(self: CgroupParent, tag: str, **limits: int | None) -> ChildGroup:
        group = original(self, tag, **limits)
        (group.path / "cgroup.procs").mkdir()  # opening it to write fails (EISDIR)
        return group

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(CgroupParent, "create", create_unjoinable)
            with pytest.raises(SpawnError) as raised:
                await runner.spawn(spec(tmp_path, f"open({str(marker)!r}, 'w')"))
        assert raised.value.kind == "spawn_failed"
        assert "cannot apply its memory and process limits" in raised.value.detail
        assert not marker.exists()
        assert runner.live == ()
    finally:
        await runner.aclose(grace_s=0.5)
