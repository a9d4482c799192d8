"""docker-compose.replicas.yml, parsed: two replicas on PostgreSQL and Redis behind a proxy with
no stickiness, sharing the CLIs' state, each with its own replica id, and settings the gateway
accepts."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.settings import load_settings
from tests.dbservers import GATEWAY_REDIS_ACL, GATEWAY_REDIS_USER

ROOT = Path(__file__).resolve().parents[2]
REPLICAS = ("gateway-1", "gateway-2")
COMPOSE = ROOT / "docker-compose.replicas.yml"


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    found: dict[str, Any] = loaded["services"]
    return found


def test_replicas_share_one_database_one_redis_and_the_clis_state(
    services: dict[str, Any],
) -> None:
    environments = [services[name]["environment"] for name in REPLICAS]
    alike = ("GATEWAY_STORAGE__URL", "GATEWAY_CLUSTER__REDIS_URL", "GATEWAY_CLUSTER__SECRET")
    for key in (*alike, "GATEWAY_TOKEN"):
        assert len({env[key] for env in environments}) == 1, key
    assert environments[0]["GATEWAY_STORAGE__URL"].startswith("postgresql+asyncpg://")
    ids = {env["GATEWAY_CLUSTER__REPLICA_ID"] for env in environments}
    assert len(ids) == len(REPLICAS)
    volumes = [set(services[name]["volumes"]) for name in REPLICAS]
    shared = volumes[0] & volumes[1]
    assert {v.rsplit(":", 1)[1] for v in shared} >= {"/workspace", "/home/agent/.claude"}
    assert all(any(v.endswith(":/data") for v in own - shared) for own in volumes)


def test_replicas_share_the_sessions_homes_records_and_worktrees(
    services: dict[str, Any],
) -> None:
    """A session's CLI home, its workspace records and its worktree must be there for
    whichever replica runs its next turn, reverts or forks it: on a volume both mount at one
    path, outside each replica's own data directory."""
    settings = {
        "GATEWAY_SANDBOX__HOMES_DIR": "sandbox.homes_dir",
        "GATEWAY_SNAPSHOTS__DIR": "snapshots.dir",
        "GATEWAY_WORKSPACES__WORKTREES_ROOT": "workspaces.worktrees_root",
    }
    for name in REPLICAS:
        env = services[name]["environment"]
        mounts = {
            target: source
            for source, target, *_ in (v.split(":") for v in services[name]["volumes"])
        }
        for variable, setting in settings.items():
            path = Path(env[variable])
            mounted = [t for t in mounts if path.is_relative_to(t)]
            assert mounted, f"{setting} ({path}) is on no volume of {name}"
            volume = mounts[max(mounted, key=len)]
            assert volume == "gateway-shared", (setting, volume)
            assert not path.is_relative_to("/data"), setting
    assert "gateway-shared" in yaml.safe_load(COMPOSE.read_text())["volumes"]
    entrypoint = (ROOT / "docker" / "entrypoint.sh").read_text()
    assert all(variable in entrypoint for variable in settings)  # made and given to the agent


def test_the_replicas_settings_are_ones_the_gateway_accepts(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = services["gateway-1"]["environment"]
    url = env["GATEWAY_STORAGE__URL"].replace("${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}", "pw")
    redis_url = env["GATEWAY_CLUSTER__REDIS_URL"].replace(
        "${REDIS_PASSWORD:?set REDIS_PASSWORD}", "redis-pw"
    )
    assert env["GATEWAY_CLUSTER__SECRET"].startswith("${GATEWAY_CLUSTER_SECRET:?")
    secret = "0123456789abcdef" * 4
    settings = load_settings(
        storage={"url": url},
        cluster={"redis_url": redis_url, "replica_id": "gw-1", "secret": secret},
    )
    assert settings.cluster.redis_url == f"redis://{GATEWAY_REDIS_USER}:redis-pw@redis:6379/0"


def test_redis_lets_in_only_the_gateway_user_with_the_rules_the_tests_run_under(
    services: dict[str, Any],
) -> None:
    redis = services["redis"]
    assert redis["environment"]["REDIS_PASSWORD"] == "${REDIS_PASSWORD:?set REDIS_PASSWORD}"
    argv = shlex.split(redis["command"][-1].replace("$$", "$"))
    assert argv[:2] == ["exec", "redis-server"]
    users = " ".join(argv).split("--user ")[1:]
    assert [u.split() for u in users] == [
        ["default", "off"],
        [GATEWAY_REDIS_USER, "on", ">$REDIS_PASSWORD", *GATEWAY_REDIS_ACL],
    ]
    check = " ".join(redis["healthcheck"]["test"])
    assert f"--user {GATEWAY_REDIS_USER}" in check
    assert "REDISCLI_AUTH" in check
    assert "--requirepass" not in argv  # a password for the default user would let it in


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
