"""End-to-end fixtures: the pinned real ``claude`` behind a real gateway, against the stub LLM."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import PINNED_CLI_BIN
from tests.gateway import GatewayProcess
from tests.stub_llm import StubLLM

CLAUDE = PINNED_CLI_BIN / "claude"


@pytest.fixture(scope="session", autouse=True)
def _pinned_claude_installed() -> None:
    if not CLAUDE.exists():
        pytest.fail(f"{CLAUDE} is missing: run `make setup` (the test command installs it)")


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with StubLLM() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "roots" / "project"
    path.mkdir(parents=True)
    return path


GatewayFactory = Callable[..., GatewayProcess]


@pytest.fixture
def make_gateway(tmp_path: Path, stub: StubLLM, workspace: Path) -> Iterator[GatewayFactory]:
    started: list[GatewayProcess] = []
    home = tmp_path / "home"
    home.mkdir()

    def make(**overrides: Any) -> GatewayProcess:
        config: dict[str, Any] = {
            "workspaces": {"roots": [str(workspace.parent)]},
            "sessions": {"approval_timeout_s": 120},
            "providers": {
                "claude_code": {
                    "turn_idle_timeout_s": 60,
                    "env": {
                        "ANTHROPIC_BASE_URL": stub.base_url,
                        "ANTHROPIC_API_KEY": "stub-key",
                        "HOME": str(home),
                        "CLAUDE_CODE_MAX_RETRIES": "0",
                    },
                }
            },
        }
        for section, values in overrides.items():
            config.setdefault(section, {}).update(values)
        gateway = GatewayProcess(data_dir=tmp_path / "data", config=config)
        started.append(gateway)
        return gateway

    yield make
    for gateway in started:
        gateway.stop()


@pytest.fixture
def gateway(make_gateway: GatewayFactory) -> GatewayProcess:
    return make_gateway().start()
