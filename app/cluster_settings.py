"""The ``[cluster]`` section of the configuration: several replicas on one PostgreSQL and one
Redis (docs/operations/replicas.md).

Replicas forward commands to each other through Redis and sign each one with
``cluster.secret``: a replica runs only what another replica holding the same secret sent,
never what anyone else who can write to Redis put there. The secret is therefore required as
soon as ``redis_url`` is set; it comes from the file or ``GATEWAY_CLUSTER__SECRET`` like the
other secrets, or from ``secret_file`` (a mounted secret).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

MIN_SECRET_CHARS = 32
"""A cluster secret shorter than this is refused (it could be guessed)."""
MAKING_ONE = (
    "make one with `openssl rand -hex 32` and give every replica the same value "
    "(cluster.secret in the file, GATEWAY_CLUSTER__SECRET, or a file named by "
    "cluster.secret_file)"
)


def _default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class ClusterSettings(BaseModel):
    """Several replicas on one PostgreSQL database, coordinating through one Redis."""

    model_config = ConfigDict(extra="forbid")

    redis_url: str | None = None
    """``redis://user:password@host:6379/0``: replicas on one PostgreSQL coordinate through
    this Redis (commands for another replica's session, live events, shared
    limits), logging in as ``user``. Unset: a single gateway. Refused with a SQLite
    ``storage.url``; the password is masked in logs and events."""
    replica_id: str = Field(default_factory=_default_replica_id, pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    """This replica's name in heartbeats, claims and ``GET /v1/sessions/{id}``'s ``owner``;
    unique."""
    lease_ttl_s: float = Field(default=15.0, ge=1, le=600)
    """A replica sends its heartbeat (to the database) every third of this; one silent for
    this long loses its sessions to another replica (app/store/ownership.py)."""
    command_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """How long a request for a session another replica owns waits for that replica's answer
    (then 503 ``cluster_unavailable``)."""
    secret: SecretStr | None = None
    """Signs every command one replica forwards to another (HMAC-SHA256); every replica needs
    the same one, at least 32 characters (``openssl rand -hex 32``). Required with
    ``redis_url``: without it replicas refuse to start. Masked in logs and events."""
    secret_file: Path | None = None
    """A file holding ``secret`` (a mounted Docker or Kubernetes secret), instead of it."""
    accepted_secrets: list[SecretStr] = []
    """Further secrets whose signatures are accepted, never used to sign: while rotating
    ``secret`` (docs/operations/replicas.md, "Rotating the cluster secret")."""
    command_window_s: float = Field(default=30.0, ge=1, le=600)
    """A forwarded command signed longer ago (or further ahead, by the sender's clock) than
    this is refused, and its id is remembered this long so that it runs at most once; the
    replicas' clocks must agree within it."""

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("cluster.redis_url must start with redis://, rediss:// or unix://")
        return url

    @field_validator("accepted_secrets")
    @classmethod
    def _accepted_long_enough(cls, secrets: list[SecretStr]) -> list[SecretStr]:
        if any(len(s.get_secret_value()) < MIN_SECRET_CHARS for s in secrets):
            raise ValueError(f"every accepted secret needs at least {MIN_SECRET_CHARS} characters")
        return secrets

    @model_validator(mode="after")
    def _signed(self) -> ClusterSettings:
        if self.secret_file is not None:
            if self.secret is not None:
                raise ValueError("cluster.secret and cluster.secret_file are both set: keep one")
            try:
                self.secret = SecretStr(self.secret_file.read_text().strip())
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(
                    f"cluster.secret_file {self.secret_file} cannot be read ({exc})"
                ) from None
        if self.secret is not None and len(self.secret.get_secret_value()) < MIN_SECRET_CHARS:
            raise ValueError(
                f"cluster.secret has fewer than {MIN_SECRET_CHARS} characters; " + MAKING_ONE
            )
        if self.redis_url is not None and self.secret is None:
            raise ValueError(
                "cluster.redis_url is set but cluster.secret is not: replicas sign the commands "
                "they forward to each other with it; " + MAKING_ONE
            )
        return self

    def signing_secrets(self) -> list[bytes]:
        """The secret that signs, then those also accepted (empty without a cluster)."""
        if self.secret is None:
            return []
        return [s.get_secret_value().encode() for s in (self.secret, *self.accepted_secrets)]

    def secrets(self) -> list[str]:
        """What the logs and events must never show: the signing secrets and Redis's
        password."""
        found = [s.decode() for s in self.signing_secrets()]
        password = urlsplit(self.redis_url).password if self.redis_url else None
        return [*found, password] if password else found
