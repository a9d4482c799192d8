"""Idempotency keys in the store, on SQLite and PostgreSQL: one claim per key wins, a kept
answer comes back until it expires, a copy of an unanswered request waits for a replica that
runs and takes over from one that stopped, and retention forgets expired keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from app.runtime.idempotency import (
    KEY_TTL,
    Claim,
    IdempotencyKeys,
    Stored,
    fingerprint,
    forget_unanswered,
)
from app.settings import Settings
from app.store.repository import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ANSWER = Stored(status=202, media_type="application/json", body='{"id":"trn_1"}')
ASKED = fingerprint({"command": "start_turn", "prompt": "hi"})


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def keys(store: Store, clock: Clock, tmp_path: Path, **cluster: object) -> IdempotencyKeys:
    """This store's keys as a gateway with these ``cluster`` settings keeps them."""
    # A replica's settings name PostgreSQL; the store used is the test's, on either engine.
    storage = {"url": "postgresql+asyncpg://gateway@127.0.0.1:1/gateway"} if cluster else {}
    settings = Settings(
        workspaces={"roots": [str(tmp_path)]},
        cluster=cluster,
        storage=storage,
    )
    return IdempotencyKeys(store, settings, clock=clock)


def keys_of_process(store: Store, clock: Clock, tmp_path: Path, name: str) -> IdempotencyKeys:
    """The keys of one gateway (no cluster) whose process is called ``name``."""
    settings = Settings(workspaces={"roots": [str(tmp_path)]}, cluster={"replica_id": name})
    return IdempotencyKeys(store, settings, clock=clock)


def replica(replica_id: str) -> dict[str, object]:
    """The ``cluster`` settings of a replica (its Redis is never reached here)."""
    return {
        "redis_url": "redis://127.0.0.1:1/0",
        "replica_id": replica_id,
        "lease_ttl_s": 60.0,
        "secret": "s" * 32,
    }


async def test_one_claim_wins_and_its_answer_comes_back_until_it_expires(
    store: Store, tmp_path: Path
) -> None:
    clock = Clock()
    here = keys(store, clock, tmp_path)
    claim = await here.begin("alice", "k1", request="start_turn ses_1", fingerprint=ASKED)
    assert isinstance(claim, Claim)
    with pytest.raises(IdempotencyKeyInUse) as busy:  # the same gateway is still answering
        await here.begin("alice", "k1", request="start_turn ses_1", fingerprint=ASKED)
    assert busy.value.retry_after_s == 1.0
    other = fingerprint({"command": "start_turn", "prompt": "bye"})
    with pytest.raises(IdempotencyKeyReused) as reused:
        await here.begin("alice", "k1", request="start_turn ses_1", fingerprint=other)
    assert reused.value.fields == {"request": "start_turn ses_1"}
    assert isinstance(await here.begin("bob", "k1", request="x", fingerprint=other), Claim)

    await claim.finish(ANSWER)
    clock.now = NOW + KEY_TTL - timedelta(seconds=1)
    assert await here.begin("alice", "k1", request="start_turn ses_1", fingerprint=ASKED) == ANSWER
    clock.now = NOW + KEY_TTL
    # Expired: the key is free again, for any request.
    assert isinstance(await here.begin("alice", "k1", request="y", fingerprint=other), Claim)


async def test_a_released_key_is_free_again(store: Store, tmp_path: Path) -> None:
    here = keys(store, Clock(), tmp_path)
    claim = await here.begin("alice", "k2", request="r", fingerprint=ASKED)
    assert isinstance(claim, Claim)
    await claim.release()
    assert isinstance(await here.begin("alice", "k2", request="r", fingerprint=ASKED), Claim)


async def test_a_request_a_previous_process_left_unanswered_is_run_again(
    store: Store, tmp_path: Path
) -> None:
    clock = Clock()
    before = keys_of_process(store, clock, tmp_path, "gw-old")
    assert isinstance(await before.begin("alice", "k3", request="r", fingerprint=ASKED), Claim)
    now = keys_of_process(store, clock, tmp_path, "gw-new")
    # One gateway per database: a request this process did not take is nobody's now.
    assert isinstance(await now.begin("alice", "k3", request="r", fingerprint=ASKED), Claim)

    left = await before.begin("alice", "k4", request="r", fingerprint=ASKED)
    assert isinstance(left, Claim)
    settings = Settings(workspaces={"roots": [str(tmp_path)]})
    assert await forget_unanswered(store, settings) == 2  # at start: k3 and k4 were in flight
    clock.now += timedelta(seconds=1)
    assert isinstance(await before.begin("alice", "k4", request="r", fingerprint=ASKED), Claim)
    await left.finish(ANSWER)  # too late: the claim was forgotten, nothing is kept
    with pytest.raises(IdempotencyKeyInUse):
        await before.begin("alice", "k4", request="r", fingerprint=ASKED)


async def test_a_replica_that_runs_keeps_its_request_and_one_that_stopped_loses_it(
    store: Store, tmp_path: Path
) -> None:
    clock = Clock()
    a = keys(store, clock, tmp_path, **replica("gw-a"))
    b = keys(store, clock, tmp_path, **replica("gw-b"))
    await store.heartbeat("gw-a")
    await store.heartbeat("gw-b")
    assert isinstance(await a.begin("alice", "k5", request="r", fingerprint=ASKED), Claim)
    with pytest.raises(IdempotencyKeyInUse):
        await b.begin("alice", "k5", request="r", fingerprint=ASKED)

    # gw-c never sent a heartbeat (it stopped): its unanswered request goes to the next copy.
    c = keys(store, clock, tmp_path, **replica("gw-c"))
    assert isinstance(await c.begin("alice", "k6", request="r", fingerprint=ASKED), Claim)
    assert isinstance(await b.begin("alice", "k6", request="r", fingerprint=ASKED), Claim)
    with pytest.raises(IdempotencyKeyInUse):  # gw-b has it now, and gw-b answers
        await a.begin("alice", "k6", request="r", fingerprint=ASKED)


async def test_retention_forgets_expired_keys_and_keeps_the_others(
    store: Store, tmp_path: Path
) -> None:
    clock = Clock()
    here = keys(store, clock, tmp_path)
    for key in ("old", "young"):
        claim = await here.begin("alice", key, request="r", fingerprint=ASKED)
        assert isinstance(claim, Claim)
        await claim.finish(ANSWER)
        clock.now += timedelta(hours=12)
    report = await store.retain(
        retention_days=30, now=NOW + KEY_TTL + timedelta(hours=1), max_events_per_session=None
    )
    assert report.idempotency_keys_deleted == 1
    clock.now = NOW + KEY_TTL + timedelta(hours=1)
    assert await here.begin("alice", "young", request="r", fingerprint=ASKED) == ANSWER
    assert isinstance(await here.begin("alice", "old", request="r", fingerprint=ASKED), Claim)
