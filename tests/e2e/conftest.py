"""End-to-end fixtures: the pinned real CLIs behind a real gateway, against the stub LLM."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.providers.catalog import executable, present_by_default
from app.settings import Settings
from tests.e2e.providers import CONFIGS
from tests.gateway import GatewayProcess
from tests.stub_llm import StubLLM


@pytest.fixture(scope="session", autouse=True)
def _pinned_clis_installed() -> None:
    settings = Settings()
    missing = [
        path
        for path in (executable(name, settings) for name in CONFIGS)
        if not Path(path).is_absolute() or not Path(path).exists()
    ]
    if missing:
        pytest.fail(f"{missing} missing from agents/node_modules: run `make setup`")


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
    """Gateways with exactly one provider enabled (``provider``), pointed at the stub."""
    started: list[GatewayProcess] = []
    home = tmp_path / "home"
    home.mkdir()

    def make(provider: str = "claude_code", **overrides: Any) -> GatewayProcess:
        # Every provider off but ``provider``, pointed at the stub.
        providers: dict[str, Any] = {name: {"enabled": False} for name in present_by_default()}
        providers[provider] = CONFIGS[provider](stub, home)
        config: dict[str, Any] = {
            "workspaces": {"roots": [str(workspace.parent)]},
            "sessions": {"approval_timeout_s": 120},
            "selection": {"default": provider},
            "providers": providers,
        }
        for section, values in overrides.items():
            if section in CONFIGS:
                providers[section].update(values)
            else:
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
