"""``[cluster]``: the secret replicas sign their commands with is required as soon as Redis is,
comes from the file, the environment or a mounted file, and is masked like every secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.redaction import Redactor, secrets_of
from app.settings import ConfigError, load_settings

POSTGRES = {"url": "postgresql+asyncpg://gateway@db:5432/gateway"}
REDIS = "redis://gateway:redis-password-0123456789@redis:6379/0"
SECRET = "cluster-secret-" + "0123456789abcdef" * 3


def test_replicas_without_a_cluster_secret_are_refused_saying_how_to_make_one() -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(storage=POSTGRES, cluster={"redis_url": REDIS})
    message = str(raised.value)
    assert "cluster.secret" in message
    assert "openssl rand -hex 32" in message
    assert "GATEWAY_CLUSTER__SECRET" in message


def test_a_short_cluster_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="32 characters"):
        load_settings(storage=POSTGRES, cluster={"redis_url": REDIS, "secret": "short"})


def test_the_cluster_secret_is_read_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_CLUSTER__SECRET", SECRET)
    settings = load_settings(storage=POSTGRES, cluster={"redis_url": REDIS})
    assert settings.cluster.signing_secrets() == [SECRET.encode()]
    monkeypatch.delenv("GATEWAY_CLUSTER__SECRET")

    mounted = tmp_path / "cluster_secret"
    mounted.write_text(SECRET + "\n")
    settings = load_settings(
        storage=POSTGRES, cluster={"redis_url": REDIS, "secret_file": str(mounted)}
    )
    assert settings.cluster.signing_secrets() == [SECRET.encode()]
    with pytest.raises(ConfigError, match="cannot be read"):
        load_settings(
            storage=POSTGRES,
            cluster={"redis_url": REDIS, "secret_file": str(tmp_path / "missing")},
        )
    with pytest.raises(ConfigError, match="keep one"):
        load_settings(
            storage=POSTGRES,
            cluster={"redis_url": REDIS, "secret": SECRET, "secret_file": str(mounted)},
        )


def test_while_rotating_the_new_secret_is_accepted_before_it_signs() -> None:
    new = "new-cluster-secret-" + "fedcba9876543210" * 3
    settings = load_settings(
        storage=POSTGRES, cluster={"redis_url": REDIS, "secret": SECRET, "accepted_secrets": [new]}
    )
    assert settings.cluster.signing_secrets() == [SECRET.encode(), new.encode()]


def test_the_cluster_secret_and_the_redis_password_are_masked() -> None:
    settings = load_settings(storage=POSTGRES, cluster={"redis_url": REDIS, "secret": SECRET})
    redact = Redactor(secrets_of(settings, "admin-token-" + "x" * 32))
    shown = redact(f"signed with {SECRET} on {REDIS}")
    assert SECRET not in shown
    assert "redis-password-0123456789" not in shown
    assert SECRET not in repr(settings.cluster)  # nor printed by a repr
