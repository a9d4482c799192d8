"""Live events written straight to a subscriber's connection by the publisher, on a real store:
in order, none twice, none missing, whether a batch goes direct or through the subscription's
task because the connection could not take it.

The connection is a recording ``RawWriter`` (what app/connections.py offers for a socket);
tests/integration/test_streams.py runs the same path over real sockets."""

from __future__ import annotations

import asyncio
import json

from app.events import MessageDelta
from app.runtime.eventlog import EventLog
from app.runtime.subscription import DirectWrite, LoggedEvent, Subscription
from tests.integration.eventlogs import SESSION, until


class Socket:
    """A connection that records what is written to it, and can refuse (a full buffer)."""

    kind = "test"

    def __init__(self) -> None:
        self.accepting = True
        self.written: list[int] = []
        """Seqs written, in order."""

    def frame(self, payload: bytes) -> bytes:
        return payload

    def write(self, data: bytes) -> bool:
        if not self.accepting:
            return False
        self.written += [json.loads(line)["seq"] for line in data.splitlines()]
        return True


def direct(socket: Socket) -> DirectWrite:
    return DirectWrite(socket, lambda events: b"".join(e.utf8 + b"\n" for e in events))


class Reader:
    """Iterates a subscription in a task, as a transport does; records what it yields."""

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self.seqs: list[int] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for item in self.subscription:
            if isinstance(item, LoggedEvent):
                self.seqs.append(item.seq)

    @property
    def parked(self) -> bool:
        return self.subscription._subscriber.parked

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        self.subscription.release()


async def append(log: EventLog, count: int) -> None:
    for i in range(count):
        await log.append(SESSION, MessageDelta(message_id="m", text=str(i)))


async def test_a_parked_subscriber_gets_live_batches_on_its_connection_not_its_task(
    log: EventLog,
) -> None:
    await append(log, 3)  # history: replayed by the task
    subscription = await log.open(SESSION, after=0)
    socket = Socket()
    subscription.write_directly(direct(socket))
    reader = Reader(subscription)
    await until(lambda: reader.parked and reader.seqs == [1, 2, 3])

    await append(log, 5)
    assert socket.written == [4, 5, 6, 7, 8]  # written as each batch was published
    assert reader.seqs == [1, 2, 3]
    assert reader.parked  # the task never woke
    await reader.stop()


async def test_a_connection_that_cannot_take_a_batch_gets_it_from_the_task_in_order(
    log: EventLog,
) -> None:
    subscription = await log.open(SESSION, after=0)
    socket = Socket()
    subscription.write_directly(direct(socket))
    reader = Reader(subscription)
    await until(lambda: reader.parked)

    await append(log, 2)  # direct
    socket.accepting = False  # the socket's buffer is full
    await append(log, 3)  # queued for the task
    await until(lambda: reader.seqs == [3, 4, 5] and reader.parked)
    socket.accepting = True
    await append(log, 2)  # direct again, once the task has written its part

    assert socket.written == [1, 2, 6, 7]
    assert reader.seqs == [3, 4, 5]
    delivered = sorted(socket.written + reader.seqs)
    assert delivered == list(range(1, 8))  # none twice, none missing
    await reader.stop()


async def test_two_kinds_of_connection_each_get_their_own_bytes(log: EventLog) -> None:
    class Upper(Socket):
        kind = "upper"

    plain, upper = Socket(), Upper()
    readers = []
    for socket in (plain, upper):
        subscription = await log.open(SESSION, after=0)
        subscription.write_directly(direct(socket))
        readers.append(Reader(subscription))
    await until(lambda: all(r.parked for r in readers))
    await append(log, 4)
    assert plain.written == upper.written == [1, 2, 3, 4]
    for reader in readers:
        await reader.stop()
