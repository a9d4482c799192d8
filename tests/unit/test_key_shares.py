"""T28: how a global cap is divided between keys (app/runtime/shares.py), without a gateway."""

from __future__ import annotations

import pytest

from app.errors import AtCapacity, KeyShareExceeded
from app.runtime.commands import Issuer
from app.runtime.shares import SharedCap, Tally, admin_keys, holder_of, process_cap
from app.settings import Settings

TOKEN = "t" * 32
ALICE = Issuer(name="alice", admin=False)
BOB = Issuer(name="bob", admin=False)
ADMIN = Issuer(name="admin", admin=True)


def settings(**limits: float) -> Settings:
    return Settings(
        server={
            "api_keys": [
                {"name": "alice", "token": TOKEN},
                {"name": "ops", "token": TOKEN + "x", "admin": True},
            ]
        },
        limits=limits,
    )


def test_t28_a_key_takes_its_share_then_the_others_fill_up_to_the_admin_reserve() -> None:
    tally = Tally(
        SharedCap(
            setting="max_subscribers", noun="streams", cap=10, key_share=0.5, admin_reserve=0.1
        )
    )
    for _ in range(5):
        tally.check(ALICE)
        tally.add(ALICE)
    with pytest.raises(KeyShareExceeded) as over:
        tally.check(ALICE)
    assert over.value.fields["held"] == 5
    for _ in range(4):
        tally.check(BOB)
        tally.add(BOB)
    with pytest.raises(AtCapacity) as reserved:
        tally.check(BOB)
    assert (reserved.value.fields["limit"], reserved.value.fields["reserve"]) == (9, 1)
    tally.check(ADMIN)
    tally.add(ADMIN)
    with pytest.raises(AtCapacity):
        tally.check(ADMIN)
    tally.remove(ALICE)
    tally.remove(BOB)
    tally.check(ALICE)
    assert (tally.total, tally.held("alice"), tally.held("bob")) == (8, 4, 3)


def test_t28_a_share_rounds_down_but_is_never_less_than_one() -> None:
    cap = SharedCap(setting="max_live_processes", noun="processes", cap=1, key_share=0.5)
    assert (cap.per_key, cap.reserve) == (1, 0)
    assert SharedCap(setting="s", noun="n", cap=64, key_share=0.5, admin_reserve=0.05).reserve == 3


def test_t28_the_admin_key_alone_holds_the_whole_cap() -> None:
    alone = process_cap(Settings(limits={"max_live_processes": 8}))
    assert (alone.per_key, alone.reserve) == (8, 0)
    shared = process_cap(settings(max_live_processes=8))
    assert (shared.per_key, shared.reserve) == (4, 0)


def test_t28_admin_keys_are_the_admin_key_and_the_admin_api_keys() -> None:
    admins = admin_keys(settings())
    assert admins == {"admin", "ops"}
    assert holder_of("ops", admins) == Issuer(name="ops", admin=True)
    assert holder_of("alice", admins) == Issuer(name="alice", admin=False)
    assert holder_of(None, admins) == Issuer(name="admin", admin=True)


def test_t28_an_undivided_cap_refuses_at_the_cap_not_at_a_share() -> None:
    tally = Tally(SharedCap(setting="max_subscribers", noun="streams", cap=2))
    for _ in range(2):
        tally.check(ALICE)
        tally.add(ALICE)
    with pytest.raises(AtCapacity):
        tally.check(ALICE)
