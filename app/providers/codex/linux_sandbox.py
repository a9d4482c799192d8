"""Codex's own sandbox on Linux: the ``codex-linux-sandbox`` helper it runs commands through.

Codex confines each command of a ``read-only`` or ``workspace-write`` thread itself: it
re-runs its own executable as ``codex-linux-sandbox``, which starts ``bwrap`` (the one on
``PATH``, else a copy it bundles) and, inside, runs the helper again to apply its seccomp
filter before the command. Observed with codex-cli 0.169.0 and 0.171.0:

- bwrap 0.9 and later (and the bundled copy) are told ``--argv0 codex-linux-sandbox`` and run
  the helper by its path;
- Debian's bwrap 0.8.0 has no ``--argv0``, so Codex has it run the helper *by name*, looked
  up on ``PATH`` inside the sandbox.

That name is on ``PATH`` only through a directory of links Codex makes at start-up under
``$CODEX_HOME/tmp/path2``, and a release build refuses to make it when ``CODEX_HOME`` lies
in the temporary directory (``$TMPDIR``, else ``/tmp``): commands may write there, and
could replace the helper. Then, with Debian's bwrap installed, every sandboxed command fails
with ``bwrap: execvp codex-linux-sandbox: No such file or directory``.

So the gateway keeps a link of its own, ``<data_dir>/codex-helpers/<id>/codex-linux-sandbox``
→ Codex's native executable, and puts its directory first on Codex's ``PATH``: the helper is
found wherever ``CODEX_HOME`` is. Codex's own link directory, when it makes one, comes before
it and wins; both name the same executable.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
from collections.abc import Mapping
from pathlib import Path

__all__ = ["HELPER", "helper_directory", "native_executable", "with_helper"]

HELPER = "codex-linux-sandbox"

_TRIPLES: Mapping[str, tuple[str, str]] = {
    "x86_64": ("x86_64-unknown-linux-musl", "@openai/codex-linux-x64"),
    "aarch64": ("aarch64-unknown-linux-musl", "@openai/codex-linux-arm64"),
}
"""Per machine: the target triple and the npm package ``@openai/codex`` takes its native
executable from (``bin/codex.js``, ``PLATFORM_PACKAGE_BY_TARGET``)."""

_ELF = b"\x7fELF"


def native_executable(executable: str, env: Mapping[str, str]) -> Path | None:
    """The native Codex executable ``executable`` runs: itself when it is one, else the one
    the npm launcher (``@openai/codex/bin/codex.js``) starts, found as Node.js would find it;
    None when there is none (not Linux, not Codex, not installed)."""
    found = shutil.which(executable, path=env.get("PATH", os.defpath))
    if found is None:
        return None
    real = Path(os.path.realpath(found))
    if _is_elf(real):
        return real
    known = _TRIPLES.get(platform.machine())
    if known is None or real.name != "codex.js":
        return None
    triple, package = known
    package_root = real.parent.parent
    # require.resolve(`${package}/package.json`) from bin/: each ancestor's node_modules.
    vendors = [directory / "node_modules" / package / "vendor" for directory in real.parent.parents]
    vendors.insert(0, real.parent / "node_modules" / package / "vendor")
    vendors.append(package_root / "vendor")  # the launcher's own fallback
    for vendor in vendors:
        candidate = vendor / triple / "bin" / "codex"
        if _is_elf(candidate):
            return Path(os.path.realpath(candidate))
    return None


def helper_directory(native: Path, state_dir: Path) -> Path:
    """A directory holding only ``codex-linux-sandbox`` → ``native``, under ``state_dir``
    (the gateway's data directory), created or corrected now: one per native executable, so
    gateways of different Codex versions sharing a data directory keep theirs."""
    digest = hashlib.sha256(str(native).encode()).hexdigest()[:16]
    directory = state_dir / "codex-helpers" / digest
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    link = directory / HELPER
    if not (link.is_symlink() and os.readlink(link) == str(native)):
        staged = directory / f".{HELPER}.{os.getpid()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(native)
        staged.replace(link)
    return directory


def with_helper(env: Mapping[str, str], directory: Path) -> dict[str, str]:
    """``env`` with ``directory`` first on ``PATH``."""
    out = dict(env)
    rest = out.get("PATH", os.defpath)
    out["PATH"] = f"{directory}{os.pathsep}{rest}" if rest else str(directory)
    return out


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == _ELF
    except OSError:
        return False
