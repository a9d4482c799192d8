"""Integration fixtures: the real gateway process with a fake ``claude`` executable."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway import GatewayProcess

FAKE_CLAUDE = Path(__file__).resolve().parent.parent / "fakes" / "fake_claude.py"


class FakeGateway(GatewayProcess):
    """A gateway whose ``claude`` is tests/fakes/fake_claude.py, logging every spawn."""

    spawn_log: Path
    workspace: Path

    def spawns(self) -> list[dict[str, Any]]:
        if not self.spawn_log.exists():
            return []
        return [json.loads(line) for line in self.spawn_log.read_text().splitlines()]


FakeGatewayFactory = Callable[..., FakeGateway]


@pytest.fixture
def make_fake_gateway(tmp_path: Path) -> Iterator[FakeGatewayFactory]:
    started: list[FakeGateway] = []
    root = tmp_path / "roots"
    workspace = root / "project"
    workspace.mkdir(parents=True)

    def make(**overrides: Any) -> FakeGateway:
        spawn_log = tmp_path / "spawns.jsonl"
        config: dict[str, Any] = {
            "workspaces": {"roots": [str(root)]},
            "providers": {
                "claude_code": {
                    "executable": str(FAKE_CLAUDE),
                    "env": {"FAKE_CLAUDE_LOG": str(spawn_log)},
                },
                "codex": {"enabled": False},
                "opencode": {"enabled": False},
            },
        }
        for section, values in overrides.items():
            if section in config["providers"]:
                config["providers"][section].update(values)
            else:
                config.setdefault(section, {}).update(values)
        gateway = FakeGateway(data_dir=tmp_path / "data", config=config)
        gateway.spawn_log = spawn_log
        gateway.workspace = workspace
        started.append(gateway)
        return gateway

    yield make
    for gateway in started:
        gateway.stop()


@pytest.fixture
def fake_gateway(make_fake_gateway: FakeGatewayFactory) -> FakeGateway:
    gateway = make_fake_gateway()
    gateway.start()
    return gateway
