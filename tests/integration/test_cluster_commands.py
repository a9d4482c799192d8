"""Commands forwarded between replicas through a real Redis: answered whatever they take,
errors arriving as the same error, a replica that does not answer reported as such; and only
what a replica holding the cluster secret signed, for this replica, recently and once, is run,
as the key that asked. An unexpected error on the owner comes back as its id only. Each
command has one outcome: an answer lost on its way is found again, a command its sender gave
up on never runs, and one for a replica that stopped sending heartbeats is cancelled at once
so that its session can be adopted."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.cluster.commands import Command, Issuer, Signer, encode_command, seal_answer
from app.cluster.redis import connect
from app.cluster_settings import ClusterSettings
from app.errors import ClusterUnavailable, GatewayError, TurnInProgress
from app.runtime.cluster import Cluster, Received
from app.runtime.forwarding import OwnerGone
from app.runtime.supervision import Supervisor
from app.store.repository import Store
from tests.dbservers import RedisServer
from tests.gateway import free_port

SECRET = "cluster-secret-0123456789abcdef0123456789"
OTHER_SECRET = "another-secret-0123456789abcdef0123456789"
ALICE = Issuer(name="alice", admin=False)
LEAKY = "upstream refused key sk-test-0123456789 at /srv/gateway/private"


def settings(redis_server: RedisServer, name: str, **values: Any) -> ClusterSettings:
    values.setdefault("secret", SECRET)
    return ClusterSettings(redis_url=redis_server.url, replica_id=name, **values)


class Owner:
    """Replica gw-a's handler: what it ran, as whom, and what it refused."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any], Issuer]] = []
        self.refused: asyncio.Queue[str] = asyncio.Queue()
        self.marked: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    async def serve(self, op: str, args: dict[str, Any], issuer: Issuer) -> Any:
        self.ran.append((op, args, issuer))
        if "m" in args:
            self.marked[args["m"]].set()
        if op == "slow":
            await asyncio.sleep(args["seconds"])
            return {"slept": args["seconds"]}
        if op == "echo":
            return {"args": args, "issuer": {"name": issuer.name, "admin": issuer.admin}}
        if op == "fail":
            raise RuntimeError(LEAKY)
        raise TurnInProgress("session s1 is already running turn t1", turn_id="t1")

    async def next_refusal(self) -> str:
        async with asyncio.timeout(10):
            return await self.refused.get()


@pytest.fixture
async def owner() -> Owner:
    return Owner()


@pytest.fixture
async def pair(
    redis_server: RedisServer, store: Store, owner: Owner
) -> AsyncIterator[list[Cluster]]:
    """Replica gw-a, serving commands with ``owner``, and gw-b, whose client reads time out
    after 0.5 s (shorter than the commands it waits for)."""
    redis_server.command("FLUSHALL")  # the gateway's own user may not
    a = Cluster(
        connect(redis_server.url),
        settings(redis_server, "gw-a"),
        store,
        refused=owner.refused.put_nowait,
    )
    b = Cluster(
        connect(redis_server.url, timeout_s=0.5),
        settings(redis_server, "gw-b", command_timeout_s=3),
        store,
    )

    serving = serve(a, owner)
    yield [a, b]
    await serving.aclose()
    await a.aclose()
    await b.aclose()


def serve(cluster: Cluster, owner: Owner) -> Supervisor:
    """Run each command ``cluster`` receives with ``owner`` and send its answer back, as a
    replica's sessions do; until the returned loops are closed."""
    loops = Supervisor(logging.getLogger(__name__))

    async def answer(received: Received) -> None:
        command = received.command
        try:
            result = await owner.serve(command.op, command.args, command.issuer)
        except Exception as exc:
            await cluster.answer(received, error=exc)
        else:
            await cluster.answer(received, result=result)

    async def spawn(received: Received) -> None:
        loops.spawn("command", answer(received))

    loops.consume("commands", cluster.commands, spawn)
    return loops


def sealed(
    op: str,
    args: dict[str, Any],
    *,
    secret: str = SECRET,
    to: str = "gw-a",
    issued_at: float | None = None,
    command_id: str = "c0ffee",
    issuer: Issuer = ALICE,
) -> bytes:
    """A command as a replica holding ``secret`` would send it."""
    now = time.time() if issued_at is None else issued_at
    command = Command(
        id=command_id, op=op, args=args, issuer=issuer, to=to, issued_at=now, deadline=now + 30
    )
    return Signer([secret.encode()]).seal("command", encode_command(command, str))


async def ran_in_order(a: Cluster, owner: Owner, marker: str) -> list[str]:
    """Push a good command after what the test pushed, wait for it to run: everything pushed
    before it has been taken by then (one list, served in order). The ops that ran."""
    await a.redis.rpush("agw:commands:gw-a", sealed("echo", {"m": marker}, command_id=marker))

    await asyncio.wait_for(owner.marked[marker].wait(), timeout=10)
    return [op for op, args, _ in owner.ran if args.get("m") != marker]


async def test_a_command_slower_than_a_redis_read_deadline_is_answered(
    pair: list[Cluster],
) -> None:
    _, b = pair
    assert await b.forward("gw-a", "slow", {"seconds": 1.5}, issuer=ALICE) == {"slept": 1.5}


async def test_an_error_on_the_owner_arrives_as_the_same_error(pair: list[Cluster]) -> None:
    _, b = pair
    with pytest.raises(TurnInProgress) as raised:
        await b.forward("gw-a", "start_turn", {}, issuer=ALICE)
    assert raised.value.status == 409
    assert raised.value.detail == "session s1 is already running turn t1"
    assert raised.value.fields == {"turn_id": "t1"}


async def test_a_replica_that_does_not_answer_is_cluster_unavailable(pair: list[Cluster]) -> None:
    _, b = pair
    with pytest.raises(ClusterUnavailable, match="gw-gone"):
        await b.forward("gw-gone", "slow", {"seconds": 0}, issuer=ALICE)


async def test_the_owner_runs_a_command_as_the_key_that_asked(pair: list[Cluster]) -> None:
    _, b = pair
    admin = Issuer(name="ops", admin=True)
    assert await b.forward("gw-a", "echo", {"x": 1}, issuer=admin) == {
        "args": {"x": 1},
        "issuer": {"name": "ops", "admin": True},
    }
    answer = await b.forward("gw-a", "echo", {"owner": None}, issuer=ALICE)
    assert answer["issuer"] == {"name": "alice", "admin": False}  # not widened by the args


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (json.dumps({"id": "x", "op": "delete", "args": {"owner": None}}).encode(), "unsigned"),
        (b"v1.00.{}", "bad_signature"),
        (sealed("delete", {}, secret=OTHER_SECRET), "bad_signature"),
        (sealed("delete", {}, to="gw-b"), "misdirected"),
        (sealed("delete", {}, issued_at=time.time() - 3600), "stale"),
        (sealed("delete", {}, issued_at=time.time() + 3600), "stale"),
    ],
    ids=["unsigned", "garbage", "wrong-secret", "other-replica", "old", "future"],
)
async def test_a_command_not_signed_for_this_replica_now_is_refused_and_logged(
    pair: list[Cluster],
    owner: Owner,
    caplog: pytest.LogCaptureFixture,
    raw: bytes,
    reason: str,
) -> None:
    a, _ = pair
    caplog.set_level(logging.WARNING, logger="app.runtime.forwarding")
    await a.redis.rpush("agw:commands:gw-a", raw)
    assert await owner.next_refusal() == reason
    assert await ran_in_order(a, owner, "after") == []  # never run
    refusals = [r for r in caplog.records if "refused a forwarded command" in r.getMessage()]
    assert [r.levelno for r in refusals] == [logging.WARNING]
    assert reason in refusals[0].getMessage()
    assert "delete" not in refusals[0].getMessage()  # nothing of its content


async def test_a_forwarded_command_captured_and_pushed_again_is_refused_as_a_replay(
    pair: list[Cluster], owner: Owner, redis_server: RedisServer, store: Store
) -> None:
    _, b = pair
    c = Cluster(
        connect(redis_server.url),
        settings(redis_server, "gw-c"),
        store,
        refused=owner.refused.put_nowait,
    )
    serving: Supervisor | None = None
    try:
        forwarded = asyncio.create_task(b.forward("gw-c", "echo", {"n": 1}, issuer=ALICE))
        captured: list[bytes | str] = []
        async with asyncio.timeout(10):  # a copy of it, as anyone who can read Redis takes it
            while not captured:
                captured = await b.redis.lrange("agw:commands:gw-c", 0, -1)
                await asyncio.sleep(0.01)
        serving = serve(c, owner)
        assert (await asyncio.wait_for(forwarded, timeout=10))["args"] == {"n": 1}
        await b.redis.rpush("agw:commands:gw-c", captured[0])
        assert await owner.next_refusal() == "replayed"
        assert [op for op, _, _ in owner.ran] == ["echo"]  # once
    finally:
        if serving is not None:
            await serving.aclose()
        await c.aclose()


async def test_a_forged_answer_is_ignored_and_the_signed_one_taken(
    pair: list[Cluster], redis_server: RedisServer
) -> None:
    _, b = pair
    forwarded = asyncio.create_task(b.forward("gw-c", "echo", {}, issuer=ALICE))
    async with asyncio.timeout(10):
        taken = await b.redis.blpop(["agw:commands:gw-c"], timeout=5)  # gw-c: the test
    assert taken is not None
    assert isinstance(taken[1], bytes)
    command_id = json.loads(taken[1].split(b".", 2)[2])["id"]
    answers = f"agw:answer:{command_id}"
    await b.redis.rpush(answers, json.dumps({"id": command_id, "result": "forged"}))
    signer = Signer([SECRET.encode()])
    await b.redis.rpush(answers, seal_answer(signer, "another", {"result": "misdirected"}, str))
    await b.redis.rpush(answers, seal_answer(signer, command_id, {"result": "real"}, str))
    assert await asyncio.wait_for(forwarded, timeout=10) == "real"


async def test_an_unexpected_error_on_the_owner_comes_back_as_its_id_only(
    pair: list[Cluster], caplog: pytest.LogCaptureFixture
) -> None:
    _, b = pair
    caplog.set_level(logging.ERROR, logger="app.runtime.forwarding")
    with pytest.raises(GatewayError) as raised:
        await b.forward("gw-a", "fail", {}, issuer=ALICE)
    error = raised.value
    assert (error.status, error.type) == (500, "internal")
    error_id = error.fields["error_id"]
    assert isinstance(error_id, str)
    assert len(error_id) >= 16
    assert error.detail.startswith(f"internal error, id {error_id}")
    assert "sk-test" not in error.detail
    assert "RuntimeError" not in error.detail
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert len(logged) == 1
    assert logged[0].exc_info is not None
    assert LEAKY in str(logged[0].exc_info[1])  # the owner's log has it all


# --- exactly one outcome per command ---------------------------------------------------------


async def test_an_answer_lost_on_its_way_is_found_in_the_command_state_and_it_ran_once(
    pair: list[Cluster], redis_server: RedisServer, store: Store, owner: Owner
) -> None:
    # gw-c waits for answers on a connection that never works: every answer pushed to it is
    # lost, as when the connection it waits on is cut or the answer list is deleted.
    c = Cluster(
        connect(redis_server.url),
        settings(redis_server, "gw-c", command_timeout_s=10),
        store,
        waiting=connect(f"redis://127.0.0.1:{free_port()}/0", blocking=True, timeout_s=0.2),
    )
    try:
        answer = await c.forward("gw-a", "echo", {"m": "lost"}, issuer=ALICE)
    finally:
        await c.aclose()
    assert answer["args"] == {"m": "lost"}
    assert [args for op, args, _ in owner.ran if op == "echo"] == [{"m": "lost"}]


async def test_a_command_nobody_took_in_time_is_reported_not_run_and_never_runs_later(
    redis_server: RedisServer, store: Store
) -> None:
    redis_server.command("FLUSHALL")
    sender = Cluster(
        connect(redis_server.url), settings(redis_server, "gw-b", command_timeout_s=1), store
    )
    late = Owner()
    with pytest.raises(ClusterUnavailable, match="it did not run") as raised:
        await sender.forward("gw-late", "echo", {"m": "too-late"}, issuer=ALICE)
    assert raised.value.fields == {"ran": False}
    # gw-late comes up within the command's grace and finds it in its list: it is skipped.
    receiver = Cluster(connect(redis_server.url), settings(redis_server, "gw-late"), store)
    serving = serve(receiver, late)
    try:
        marker = sealed("echo", {"m": "marker"}, to="gw-late", command_id="marker")
        await receiver.redis.rpush("agw:commands:gw-late", marker)
        await asyncio.wait_for(late.marked["marker"].wait(), timeout=10)
    finally:
        await serving.aclose()
        await receiver.aclose()
        await sender.aclose()
    assert [args["m"] for _, args, _ in late.ran] == ["marker"]


async def test_a_command_for_a_replica_that_stopped_beating_is_cancelled_as_owner_gone(
    redis_server: RedisServer, store: Store
) -> None:
    redis_server.command("FLUSHALL")
    ticks = iter(range(0, 10**9, 100))  # every look at the clock: 100 s later
    sender = Cluster(
        connect(redis_server.url),
        settings(redis_server, "gw-b", lease_ttl_s=5, command_timeout_s=20),
        store,
        monotonic=lambda: float(next(ticks)),
    )
    try:
        assert await sender.beat()
        assert sender.may_adopt()
        began = time.monotonic()
        with pytest.raises(OwnerGone) as raised:  # gw-dead never sent a heartbeat
            await sender.forward("gw-dead", "echo", {}, issuer=ALICE)
        assert time.monotonic() - began < 10  # well before the command's timeout
        assert raised.value.replica_id == "gw-dead"
        keys = redis_server.command("KEYS", "agw:cmd:*")
        assert isinstance(keys, list)
        assert len(keys) == 1
        assert isinstance(keys[0], bytes)
        assert redis_server.command("GET", keys[0]) == b"cancelled"  # it never runs there
    finally:
        await sender.aclose()
