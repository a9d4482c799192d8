"""docker-compose.replicas.yml, parsed: two replicas on PostgreSQL and Redis behind a proxy with
no stickiness, sharing the CLIs' state, each with its own replica id, and settings the gateway
accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
REPLICAS = ("gateway-1", "gateway-2")


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.replicas.yml").read_text())
    found: dict[str, Any] = loaded["services"]
    return found


def test_replicas_share_one_database_one_redis_and_the_clis_state(
    services: dict[str, Any],
) -> None:
    environments = [services[name]["environment"] for name in REPLICAS]
    for key in ("GATEWAY_STORAGE__URL", "GATEWAY_CLUSTER__REDIS_URL", "GATEWAY_TOKEN"):
        assert len({env[key] for env in environments}) == 1, key
    assert environments[0]["GATEWAY_STORAGE__URL"].startswith("postgresql+asyncpg://")
    ids = {env["GATEWAY_CLUSTER__REPLICA_ID"] for env in environments}
    assert len(ids) == len(REPLICAS)
    volumes = [set(services[name]["volumes"]) for name in REPLICAS]
    shared = volumes[0] & volumes[1]
    assert {v.rsplit(":", 1)[1] for v in shared} >= {"/workspace", "/home/agent/.claude"}
    assert all(any(v.endswith(":/data") for v in own - shared) for own in volumes)


def test_the_replicas_settings_are_ones_the_gateway_accepts(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = services["gateway-1"]["environment"]
    url = env["GATEWAY_STORAGE__URL"].replace("${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}", "pw")
    settings = load_settings(
        storage={"url": url},
        cluster={"redis_url": env["GATEWAY_CLUSTER__REDIS_URL"], "replica_id": "gw-1"},
    )
    assert settings.cluster.redis_url == "redis://redis:6379/0"


def test_the_proxy_spreads_requests_without_stickiness_and_passes_streams_through() -> None:
    conf = (ROOT / "docker" / "replicas-nginx.conf").read_text()
    upstream = conf.split("upstream gateways {", 1)[1].split("}", 1)[0]
    assert [line.split()[1] for line in upstream.strip().splitlines()] == [
        "gateway-1:8765",
        "gateway-2:8765",
    ]
    assert "ip_hash" not in conf
    assert "hash " not in conf
    assert "sticky" not in conf
    assert "proxy_buffering off;" in conf
    assert "proxy_set_header Upgrade $http_upgrade;" in conf
