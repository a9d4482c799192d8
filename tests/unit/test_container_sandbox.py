"""The container runs the sandbox: the image has bubblewrap, and every gateway service of both
compose files runs under docker/seccomp-sandbox.json, Docker's default seccomp profile plus
exactly the system calls bwrap makes to build a sandbox in a user namespace.

The profile is judged the way dockerd expands it for a container (amd64, Docker's default
capabilities: no CAP_SYS_ADMIN), then each system call bwrap makes is evaluated against it:
the calls below are the ones ``strace -f`` shows bwrap making as an unprivileged user with
``--unshare-user --unshare-pid --die-with-parent --new-session --cap-drop ALL``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_container_image import DOCKERFILE, parse, stages

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "docker" / "seccomp-sandbox.json"
SANDBOX_OPTS = [
    "no-new-privileges:true",
    "seccomp=./docker/seccomp-sandbox.json",
    "apparmor=unconfined",
]
# Every service built from this repository, per compose file.
GATEWAYS = {
    "docker-compose.yml": {"gateway"},
    "docker-compose.replicas.yml": {"gateway-1", "gateway-2"},
}
# The profile less the rules marked "Agent Gateway sandbox:" is moby's default profile as
# dumped by json.dumps(indent="\t"): vendor/github.com/moby/profiles/seccomp/default.json at
# moby/moby tag docker-v29.7.2 (github.com/moby/profiles/seccomp v0.2.3).
UPSTREAM_SHA256 = "536529b665dd0972c37bfb569f5d4ac8a53592e7b00752bc39ff063ca9864c74"
ADDED = "Agent Gateway sandbox:"

# What dockerd gives a container unless told otherwise (no CAP_SYS_ADMIN).
DOCKER_DEFAULT_CAPS = frozenset(
    {
        "CAP_AUDIT_WRITE",
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FOWNER",
        "CAP_FSETID",
        "CAP_KILL",
        "CAP_MKNOD",
        "CAP_NET_BIND_SERVICE",
        "CAP_NET_RAW",
        "CAP_SETFCAP",
        "CAP_SETGID",
        "CAP_SETPCAP",
        "CAP_SETUID",
        "CAP_SYS_CHROOT",
    }
)
ARCH = "amd64"
EPERM, ENOSYS = 1, 38

SIGCHLD = 17
CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
THREAD = 0x003D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[int, ...] = ()


# What bwrap 0.8 calls to build the sandbox and the profile must let through (strace -f).
BWRAP_CALLS = [
    Call("clone", (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD,)),
    Call("mount"),
    Call("pivot_root"),
    Call("umount2"),
    Call("unshare", (CLONE_NEWUSER,)),
]
# Namespaces the gateway's sandbox does not make, which stay refused: a new network namespace
# would open the kernel's netfilter code to the agent, the others buy nothing.
REFUSED = [
    *(
        Call("clone", (CLONE_NEWUSER | flag | SIGCHLD,))
        for flag in (CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP)
    ),
    *(
        Call("unshare", (CLONE_NEWUSER | flag,))
        for flag in (CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME)
    ),
    Call("setns"),
    Call("open_tree"),
    Call("move_mount"),
    Call("fsopen"),
]


def expand(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The rules dockerd keeps for a container (moby/profiles seccomp_linux.go)."""
    kept = []
    for rule in profile["syscalls"]:
        includes, excludes = rule.get("includes") or {}, rule.get("excludes") or {}
        if ARCH in excludes.get("arches", []):
            continue
        if set(excludes.get("caps", [])) & DOCKER_DEFAULT_CAPS:
            continue
        if includes.get("arches") and ARCH not in includes["arches"]:
            continue
        if not set(includes.get("caps", [])) <= DOCKER_DEFAULT_CAPS:
            continue
        kept.append(rule)
    return kept


def _matches(condition: dict[str, Any], args: tuple[int, ...]) -> bool:
    value = args[int(condition["index"])]
    op, datum, datum_two = (
        condition["op"],
        int(condition["value"]),
        int(condition.get("valueTwo", 0)),
    )
    if op == "SCMP_CMP_MASKED_EQ":
        return value & datum == datum_two
    compare: dict[str, bool] = {"SCMP_CMP_EQ": value == datum, "SCMP_CMP_LT": value < datum}
    compare |= {"SCMP_CMP_GT": value > datum, "SCMP_CMP_NE": value != datum}
    return compare[op]


def verdict(profile: dict[str, Any], call: Call) -> str | int:
    """``"allow"``, or the errno the container's process gets for ``call``."""
    errnos: list[int] = []
    for rule in expand(profile):
        if call.name not in rule["names"]:
            continue
        if not all(_matches(condition, call.args) for condition in rule.get("args", [])):
            continue
        if rule["action"] == "SCMP_ACT_ALLOW":
            return "allow"
        errnos.append(rule.get("errnoRet", profile["defaultErrnoRet"]))
    return errnos[0] if errnos else int(profile["defaultErrnoRet"])


@pytest.fixture(scope="module")
def profile() -> dict[str, Any]:
    loaded = json.loads(PROFILE.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def upstream(profile: dict[str, Any]) -> dict[str, Any]:
    rules = [r for r in profile["syscalls"] if not r.get("comment", "").startswith(ADDED)]
    return {**profile, "syscalls": rules}


def test_the_profile_refuses_what_it_does_not_name(profile: dict[str, Any]) -> None:
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert profile["defaultErrnoRet"] == EPERM
    assert verdict(profile, Call("kexec_load")) == EPERM
    assert verdict(profile, Call("bpf")) == EPERM


def test_the_rest_of_the_profile_is_dockers_default(upstream: dict[str, Any]) -> None:
    dumped = json.dumps(upstream, indent="\t").encode()
    assert hashlib.sha256(dumped).hexdigest() == UPSTREAM_SHA256


def test_dockers_default_refuses_what_bwrap_needs(upstream: dict[str, Any]) -> None:
    for call in BWRAP_CALLS:
        assert verdict(upstream, call) == EPERM, call


def test_the_profile_allows_what_bwrap_calls(profile: dict[str, Any]) -> None:
    for call in BWRAP_CALLS:
        assert verdict(profile, call) == "allow", call
    assert verdict(profile, Call("clone", (THREAD,))) == "allow"  # threads, as before


def test_the_profile_adds_nothing_else(profile: dict[str, Any]) -> None:
    added = [r for r in profile["syscalls"] if r.get("comment", "").startswith(ADDED)]
    assert {name for rule in added for name in rule["names"]} == {c.name for c in BWRAP_CALLS}
    for call in REFUSED:
        assert verdict(profile, call) == EPERM, call
    # clone3 passes its flags in memory, out of seccomp's sight: it stays ENOSYS, so glibc
    # falls back to clone, whose flags the profile checks.
    assert verdict(profile, Call("clone3")) == ENOSYS


def _compose(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("name", sorted(GATEWAYS))
def test_every_gateway_service_runs_under_the_sandbox_profile(name: str) -> None:
    services = _compose(name)["services"]
    built_here = {key for key, service in services.items() if service.get("build") == "."}
    assert built_here == GATEWAYS[name]
    for key in built_here:
        service = services[key]
        assert sorted(service["security_opt"]) == sorted(SANDBOX_OPTS), key
        assert not service.get("privileged"), key
        assert not service.get("cap_add"), key
        seccomp = next(o for o in service["security_opt"] if o.startswith("seccomp="))
        path = (ROOT / name).parent / seccomp.removeprefix("seccomp=")  # compose: project dir
        assert path.resolve() == PROFILE
        assert path.is_file()


def test_the_image_installs_bubblewrap_and_never_a_setuid_one() -> None:
    final = stages(parse(DOCKERFILE.read_text()))[-1]
    installs = [i.value for i in final if i.keyword == "RUN" and "apt-get install" in i.value]
    assert len(installs) == 1
    words = installs[0].split("apt-get install", 1)[1].split("&&", 1)[0].split()
    assert "--no-install-recommends" in words
    assert "bubblewrap" in words
    assert "test ! -u /usr/bin/bwrap" in installs[0]
    assert not [i for i in final if i.keyword == "USER"]  # the entrypoint drops to `agent`
