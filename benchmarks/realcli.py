"""The pinned agent CLIs against the stub model: behind the gateway, and run directly.

The gateway's configuration for each CLI is the end-to-end tests' (tests/e2e/providers.py);
run directly, each CLI gets the same environment and the variables the gateway always sets
(telemetry, update checks and non-essential traffic off), so both talk only to the stub on
127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.providers.catalog import present_by_default
from app.providers.claude.provider import FIXED_ENV as CLAUDE_ENV
from app.providers.codex.argv import config_overrides
from app.providers.opencode.config import FIXED_ENV as OPENCODE_ENV
from app.settings import PINNED_CLI_BIN
from benchmarks.harness import AUTH, BENCH_LIMITS, Api
from tests.e2e.providers import CONFIGS
from tests.gateway import GatewayProcess
from tests.stub_llm import StubLLM

PROVIDERS = ("claude_code", "codex", "opencode")
PROMPT = "Say hello"
TEXT = b"Hello"


@dataclass
class Setup:
    stub: StubLLM
    home: Path
    workspace: Path
    base: Path


@contextlib.contextmanager
def stub_setup(base: Path) -> Iterator[Setup]:
    home = base / "home"
    workspace = base / "roots" / "project"
    home.mkdir(parents=True)
    workspace.mkdir(parents=True)
    with StubLLM() as stub:
        yield Setup(stub=stub, home=home, workspace=workspace, base=base)


def gateway_for(setup: Setup, provider: str, **provider_overrides: Any) -> GatewayProcess:
    providers: dict[str, Any] = {name: {"enabled": False} for name in present_by_default()}
    providers[provider] = {**CONFIGS[provider](setup.stub, setup.home), **provider_overrides}
    config: dict[str, Any] = {
        "workspaces": {"roots": [str(setup.workspace.parent)]},
        "selection": {"default": provider},
        "providers": providers,
        "limits": dict(BENCH_LIMITS),
    }
    gateway = GatewayProcess(data_dir=setup.base / f"data-{provider}", config=config)
    gateway.workspace = setup.workspace  # type: ignore[attr-defined]
    return gateway


@contextlib.asynccontextmanager
async def gateway_running(setup: Setup, provider: str, **overrides: Any) -> AsyncIterator[Api]:
    gateway = gateway_for(setup, provider, **overrides)
    await asyncio.to_thread(gateway.start, 60.0)
    try:
        async with Api(gateway) as api:  # type: ignore[arg-type]
            yield api
    finally:
        await asyncio.to_thread(gateway.stop)


@dataclass
class TurnTiming:
    first_event_ms: float
    first_text_ms: float
    completed_ms: float


async def timed_turn(api: Api, session_id: str) -> TurnTiming:
    """POST a turn, reading the session's SSE stream (opened before): times from the POST."""
    after = await api.last_seq(session_id)
    headers = {**AUTH, "Accept": "text/event-stream", "Last-Event-ID": str(after)}
    first_event = first_text = 0
    async with api.http.stream(
        "GET", f"/v1/sessions/{session_id}/events", headers=headers
    ) as response:
        lines = response.aiter_lines()
        await anext(lines)  # the ": connected" comment: subscribed
        start = time.monotonic_ns()
        await api.start_turn(session_id, PROMPT)
        async for line in lines:
            if not line.startswith("data:"):
                continue
            now = time.monotonic_ns()
            envelope = json.loads(line[5:])
            first_event = first_event or now
            if envelope["type"] == "message.delta" and not first_text:
                first_text = now
            if envelope["type"] in {"turn.completed", "turn.failed", "turn.interrupted"}:
                if envelope["type"] != "turn.completed":
                    raise RuntimeError(f"turn ended {envelope}")
                return TurnTiming(
                    first_event_ms=round((first_event - start) / 1e6, 1),
                    first_text_ms=round(((first_text or now) - start) / 1e6, 1),
                    completed_ms=round((now - start) / 1e6, 1),
                )
    raise RuntimeError("the stream ended before the turn did")


# --- the CLIs run directly ---------------------------------------------------------------------


def _base_env(extra: dict[str, str]) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **extra}


def direct_command(
    setup: Setup, provider: str, *, streaming_input: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run ``provider``'s CLI once on ``PROMPT`` (or, for Claude
    Code with ``streaming_input``, as a long-lived stream-json process like the gateway's)."""
    config = CONFIGS[provider](setup.stub, setup.home)
    env = _base_env(config["env"])
    if provider == "claude_code":
        env.update(CLAUDE_ENV)
        argv = [str(PINNED_CLI_BIN / "claude"), "--output-format", "stream-json", "--verbose"]
        argv += ["--include-partial-messages", "--setting-sources", "user"]
        argv += ['--mcp-config={"mcpServers":{}}', "--strict-mcp-config"]
        if streaming_input:
            argv += ["--input-format", "stream-json", "--permission-prompt-tool=stdio"]
            return [*argv, "--permission-mode", "default"], env
        return [*argv, "-p", PROMPT], env
    if provider == "codex":
        argv = [str(PINNED_CLI_BIN / "codex"), "exec", "--json", "--skip-git-repo-check"]
        argv += ["--model", config["model"]]
        for key, value in config_overrides(config["config"]):
            argv += ["-c", f"{key}={value}"]
        return [*argv, PROMPT], env
    env.update(OPENCODE_ENV)
    env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config["config"])
    argv = [str(PINNED_CLI_BIN / "opencode"), "run", "--format", "json", "--model", config["model"]]
    return [*argv, PROMPT], env


async def direct_once(setup: Setup, provider: str) -> TurnTiming:
    """Start the CLI on ``PROMPT``: times to its first stdout line, first model text, exit."""
    argv, env = direct_command(setup, provider)
    start = time.monotonic_ns()
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=setup.workspace,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=1 << 24,
    )
    assert process.stdout is not None
    first_line = first_text = 0
    while line := await process.stdout.readline():
        now = time.monotonic_ns()
        first_line = first_line or now
        if TEXT in line and not first_text:
            first_text = now
    await asyncio.wait_for(process.wait(), 120)
    end = time.monotonic_ns()
    return TurnTiming(
        first_event_ms=round((first_line - start) / 1e6, 1),
        first_text_ms=round(((first_text or end) - start) / 1e6, 1),
        completed_ms=round((end - start) / 1e6, 1),
    )


async def claude_warm_direct(setup: Setup) -> TurnTiming:
    """Claude Code as the gateway runs it (stream-json in and out), the second message timed."""
    argv, env = direct_command(setup, "claude_code", streaming_input=True)
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=setup.workspace,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=1 << 24,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    message = json.dumps({"type": "user", "message": {"role": "user", "content": PROMPT}})
    try:
        timing = None
        for _ in range(2):
            start = time.monotonic_ns()
            process.stdin.write(message.encode() + b"\n")
            await process.stdin.drain()
            first_line = first_text = 0
            while line := await asyncio.wait_for(process.stdout.readline(), 120):
                now = time.monotonic_ns()
                first_line = first_line or now
                if b"text_delta" in line and not first_text:
                    first_text = now
                if b'"result"' in line and json.loads(line).get("type") == "result":
                    timing = TurnTiming(
                        first_event_ms=round((first_line - start) / 1e6, 1),
                        first_text_ms=round(((first_text or now) - start) / 1e6, 1),
                        completed_ms=round((now - start) / 1e6, 1),
                    )
                    break
        assert timing is not None
        return timing
    finally:
        process.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
