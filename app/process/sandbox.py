"""The sandbox every agent process runs in: a bubblewrap (``bwrap``) command line.

A ``Confinement`` says what a child may see; ``wrap`` turns it and the child's argv into the
``bwrap`` command the runner starts instead. Inside, the child sees:

- the system read-only (``/usr`` and the merged-``/usr`` links, ``/etc``), plus the paths the
  confinement names read-only (the agent's installation, login files) or writable (its home);
- its workspace writable, at its own path, bound from the directory the runner opened
  (``/proc/self/cwd`` of ``bwrap``, which starts in it): a path swapped for a symlink after
  the runner's check cannot redirect the bind. A workspace inside a covered directory (a
  session's worktree under the worktrees root) is bound again after the covers, as its home;
- for a session on a Git worktree, the repository's Git directory writable (to commit), with
  its configuration and hooks read-only over it: they would run outside the sandbox, in the
  next ``git`` its owner (or the gateway) runs there;
- a private ``/tmp``, ``/dev`` and ``/proc`` in a PID namespace of its own, so no other
  process (the gateway's ``/proc/<pid>/environ`` included) is visible;
- nothing else: every path in ``hidden`` that a bind would expose (the gateway's data
  directory inside a workspace, its configuration file under ``/etc``) is covered by an empty
  directory or ``/dev/null``; the child's own home, bound after the covers, shows through.

The network is shared: agents need their model API.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SYSTEM_PATHS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
"""Bound read-only when they exist; a merged-``/usr`` link (``/bin -> usr/bin``) stays a link."""

WORKSPACE_SOURCE = "/proc/self/cwd"
"""Where ``bwrap`` finds the workspace: the runner starts it in the directory it opened."""


@dataclass(frozen=True, kw_only=True)
class Confinement:
    """What one sandboxed child sees besides the system (all paths absolute, resolved)."""

    bwrap: str
    """The ``bwrap`` executable."""
    read_only: tuple[Path, ...] = ()
    """Bound read-only at their own paths (the agent's installation)."""
    writable: tuple[Path, ...] = ()
    """Bound writable at their own paths (a cache the operator shares with every agent, the
    Git directory of the repository a session's worktree belongs to)."""
    guarded: tuple[Path, ...] = ()
    """Bound read-only at their own paths over the writable binds they lie in (that Git
    directory's configuration and hooks)."""
    home: Path | None = None
    """The child's own home, bound writable after the covers (it may lie in a covered
    directory: the gateway's data directory)."""
    files: tuple[tuple[Path, Path], ...] = ()
    """``(source, target)`` pairs bound read-only into the home (login files)."""
    exposed: tuple[Path, ...] = ()
    """The gateway's own directories the child needs, bound read-only after the covers (a
    helper directory on its ``PATH`` kept in the data directory)."""
    workspace: Path | None = None
    """Bound writable at its own path from the child's working directory; None: no workspace
    (the child starts in its home)."""
    workspace_writable: bool = True
    hidden: tuple[Path, ...] = ()
    """Covered wherever a bind above would show them."""
    as_user: int | None = None
    """The uid and gid the child has inside its user namespace, when the gateway runs as
    root: never root inside, so an agent's own sandbox (Codex's bwrap) can make a user
    namespace of its own there, and no CLI refuses a mode for running as root."""

    @property
    def chdir(self) -> Path | None:
        return self.workspace if self.workspace is not None else self.home


def wrap(confinement: Confinement, argv: Sequence[str]) -> tuple[str, ...]:
    """The ``bwrap`` command that runs ``argv`` inside ``confinement``.

    The caller starts it in the workspace's directory (the bind's source). Mounts are made in
    order: the private ``/tmp`` before binds that may lie under it, the covers after what they
    cover, the child's home and login files last.
    """
    c = confinement
    # User, mount and PID namespaces only: what the container's seccomp profile allows
    # (docker/seccomp-sandbox.json). The network is shared on purpose.
    args: list[str] = [c.bwrap, "--die-with-parent", "--unshare-user", "--unshare-pid"]
    if c.as_user is not None:
        args += ["--uid", str(c.as_user), "--gid", str(c.as_user)]
    args += ["--cap-drop", "ALL"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108 - its own tmpfs
    for name in SYSTEM_PATHS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    shown: list[Path] = [Path(name) for name in SYSTEM_PATHS]
    for path in c.read_only:
        args += ["--ro-bind", str(path), str(path)]
        shown.append(path)
    for path in c.writable:
        args += ["--bind", str(path), str(path)]
        shown.append(path)
    for path in c.guarded:
        args += ["--ro-bind", str(path), str(path)]
    if c.workspace is not None:
        args += ["--bind" if c.workspace_writable else "--ro-bind", WORKSPACE_SOURCE]
        args.append(str(c.workspace))
        shown.append(c.workspace)
    covered: list[Path] = []
    # Outermost first; a path under a directory already covered is out of sight, and a cover
    # of its own would only put its name back (bwrap makes the mount point in the cover).
    for path in sorted(c.hidden, key=lambda p: len(p.parts)):
        if any(path.is_relative_to(done) for done in covered):
            continue
        if any(path == top or path.is_relative_to(top) for top in shown):
            cover = _cover(path)
            args += cover
            if cover[:1] == ["--tmpfs"]:
                covered.append(path)
    # After the covers: the gateway's own paths for this child (its worktree and its home
    # under the data directory) show through a cover of the directory they lie in.
    if c.workspace is not None and any(c.workspace.is_relative_to(done) for done in covered):
        args += ["--bind" if c.workspace_writable else "--ro-bind", WORKSPACE_SOURCE]
        args.append(str(c.workspace))
        for path in sorted(c.hidden, key=lambda p: len(p.parts)):
            if path.is_relative_to(c.workspace) and path != c.workspace:
                args += _cover(path)
    for path in c.exposed:
        args += ["--ro-bind", str(path), str(path)]
    if c.home is not None:
        args += ["--bind", str(c.home), str(c.home)]
    for source, target in c.files:
        args += ["--ro-bind", str(source), str(target)]
    if c.chdir is not None:
        args += ["--chdir", str(c.chdir)]
    return (*args, "--", *argv)


def _cover(path: Path) -> list[str]:
    """Hide ``path``: an empty directory of the sandbox's own over a directory, ``/dev/null`` over a
    file; nothing for a path that does not exist (there is nothing to show)."""
    if path.is_dir():
        return ["--tmpfs", str(path)]
    if path.exists():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


def probe(bwrap: str, *, as_user: int | None, timeout_s: float = 10.0) -> str | None:
    """Why ``bwrap`` cannot start a sandbox here (None when it can): it is run once with the
    same namespaces as a child's. Blocks; run it off the event loop."""
    confinement = Confinement(bwrap=bwrap, as_user=as_user)
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argv, no shell
            wrap(confinement, ("/bin/true",)),
            capture_output=True,
            timeout=timeout_s,
            check=False,
            cwd="/",
        )
    except FileNotFoundError:
        return f"{bwrap} is not installed (Debian: apt-get install bubblewrap)"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not be run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"{bwrap} cannot create a sandbox here: {said[-1] if said else done.returncode}"
    return None
