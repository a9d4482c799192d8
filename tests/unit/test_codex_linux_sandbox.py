"""Codex's sandbox helper: which native executable runs ``codex-linux-sandbox``, the link the
gateway keeps to it, and the ``PATH`` Codex is started with."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.process.runner import ProcessRunner
from app.providers.catalog import executable
from app.providers.codex.linux_sandbox import (
    HELPER,
    helper_directory,
    native_executable,
    with_helper,
)
from app.providers.codex.provider import CodexProvider
from app.providers.descriptor import BuildContext
from app.settings import ProviderSettings, Settings

TRIPLE = "x86_64-unknown-linux-musl"


@pytest.fixture(autouse=True)
def _x86_64(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("app.providers.codex.linux_sandbox.platform.machine", lambda: "x86_64")


def elf(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF" + b"\0" * 60)
    path.chmod(0o755)
    return path


def npm_install(root: Path, *, nested: bool = False) -> tuple[Path, Path]:
    """``root/node_modules`` as npm lays out ``@openai/codex``: the launcher, ``.bin/codex``
    linking to it, and the platform package beside it (or inside it when ``nested``)."""
    modules = root / "node_modules"
    launcher = modules / "@openai" / "codex" / "bin" / "codex.js"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/usr/bin/env node\n")
    launcher.chmod(0o755)
    (modules / ".bin").mkdir()
    (modules / ".bin" / "codex").symlink_to("../@openai/codex/bin/codex.js")
    owner = modules / "@openai" / "codex" if nested else root
    package = owner / "node_modules" / "@openai" / "codex-linux-x64"
    native = elf(package / "vendor" / TRIPLE / "bin" / "codex")
    return modules / ".bin" / "codex", native


def test_the_npm_launcher_leads_to_the_platform_package_beside_it(tmp_path: Path) -> None:
    command, native = npm_install(tmp_path)
    assert native_executable(str(command), {"PATH": ""}) == native


def test_the_npm_launcher_leads_to_a_platform_package_inside_it(tmp_path: Path) -> None:
    command, native = npm_install(tmp_path, nested=True)
    assert native_executable(str(command), {"PATH": ""}) == native


def test_a_command_name_is_looked_up_on_the_path_it_will_run_with(tmp_path: Path) -> None:
    command, native = npm_install(tmp_path)
    assert native_executable("codex", {"PATH": str(command.parent)}) == native
    assert native_executable("codex", {"PATH": str(tmp_path)}) is None


def test_a_native_executable_is_its_own_helper(tmp_path: Path) -> None:
    native = elf(tmp_path / "bin" / "codex")
    (tmp_path / "codex-link").symlink_to(native)
    assert native_executable(str(tmp_path / "codex-link"), {}) == native


def test_a_launcher_without_its_platform_package_or_another_script_has_none(
    tmp_path: Path,
) -> None:
    command, native = npm_install(tmp_path)
    native.unlink()
    assert native_executable(str(command), {}) is None
    script = tmp_path / "fake_codex.py"
    script.write_text("#!/usr/bin/env python3\n")
    script.chmod(0o755)
    assert native_executable(str(script), {}) is None


def test_the_pinned_codex_has_a_native_executable() -> None:
    native = native_executable(executable("codex", Settings()), {})
    assert native is not None
    assert native.read_bytes()[:4] == b"\x7fELF"


def test_the_helper_link_names_the_native_executable_and_is_kept_right(tmp_path: Path) -> None:
    first, second = elf(tmp_path / "a" / "codex"), elf(tmp_path / "b" / "codex")
    directory = helper_directory(first, tmp_path / "data")
    assert directory.is_relative_to(tmp_path / "data" / "codex-helpers")
    assert sorted(p.name for p in directory.iterdir()) == [HELPER]
    assert (directory / HELPER).resolve() == first
    assert directory.stat().st_mode & 0o777 == 0o700
    # Broken by hand: put right on the next start.
    (directory / HELPER).unlink()
    (directory / HELPER).symlink_to(second)
    assert helper_directory(first, tmp_path / "data") == directory
    assert (directory / HELPER).resolve() == first
    # Another executable gets a directory of its own.
    other = helper_directory(second, tmp_path / "data")
    assert other != directory
    assert (other / HELPER).resolve() == second


def test_the_helper_directory_comes_first_on_path(tmp_path: Path) -> None:
    assert with_helper({"PATH": "/usr/bin:/bin", "HOME": "/h"}, tmp_path) == {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "HOME": "/h",
    }


def helper_of(directory: str) -> Path:
    return (Path(directory) / HELPER).resolve()


async def test_codex_starts_with_the_helper_on_its_path(tmp_path: Path) -> None:
    command, native = npm_install(tmp_path / "install")
    runner = ProcessRunner()
    try:
        provider = CodexProvider(
            BuildContext(
                name="codex",
                settings=ProviderSettings(),
                executable=str(command),
                runner=runner,
                parent_env={"PATH": "/usr/bin:/bin"},
                state_dir=tmp_path / "data",
            )
        )
        path = provider.server._env["PATH"].split(os.pathsep)
        assert path[1:] == ["/usr/bin", "/bin"]
        assert helper_of(path[0]) == native
        assert path[0].startswith(f"{tmp_path / 'data'}{os.sep}")
    finally:
        await runner.aclose(grace_s=1)
