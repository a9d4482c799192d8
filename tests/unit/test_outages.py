"""A dependency that stops answering is logged once when it goes and once when it is back,
however many calls fail meanwhile; one failed call between answers is no outage."""

from __future__ import annotations

import logging

import pytest

from app.outages import Outage

log = logging.getLogger("tests.outages")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_one_line_when_it_begins_and_one_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=log.name)
    clock = Clock()
    redis = Outage("redis", logger=log, clock=clock)
    redis.answered()  # nothing to say while it answers
    assert not redis.down
    assert redis.failed("ConnectionError: refused") is False  # not yet an outage
    clock.now += 0.1
    assert redis.failed("TimeoutError: no answer") is True
    for _ in range(49):
        clock.now += 0.1
        assert redis.failed("ConnectionError: refused") is False
    assert redis.down
    assert redis.reason == "ConnectionError: refused"
    redis.answered()
    redis.answered()
    assert not redis.down
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert loud == [
        "redis unreachable: ConnectionError: refused",
        "redis reachable again after 5.0 s (51 failed calls)",
    ]
    assert [r.levelno for r in caplog.records].count(logging.DEBUG) == 50
    began, ended = (r for r in caplog.records if r.levelno >= logging.INFO)
    assert began.__dict__["event"] == "outage.began"
    assert ended.__dict__["outage_s"] == 5.0


def test_one_failed_call_between_answers_is_no_outage(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=log.name)
    redis = Outage("redis", logger=log, clock=Clock())
    for _ in range(3):  # a connection pooled before a restart, failing on its first use
        redis.failed("ConnectionError: Connection closed by server.")
        assert not redis.down
        redis.answered()
    assert [r.levelno for r in caplog.records] == [logging.DEBUG] * 6


def test_a_second_outage_is_logged_again(caplog: pytest.LogCaptureFixture) -> None:
    database = Outage("database", logger=log, clock=Clock())
    for _ in range(2):
        database.failed("OSError: connection refused")
        database.failed("OSError: connection refused")
        database.answered()
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == ["database unreachable: OSError: connection refused"] * 2
