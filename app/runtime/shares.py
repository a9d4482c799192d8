"""Per-key shares of the caps every key shares: one key cannot take a whole cap.

Two caps are shared this way, each counted by the replica that holds what it counts (as the
caps themselves are): event subscribers (``limits.max_subscribers``; a stream counts for the
key that opened it) and per-session CLI processes (``limits.max_live_processes``; a process,
or a running turn, counts for the key that owns the session, whoever started the turn):

    0 ──────────── any key ──────────── cap - reserve ──── admin keys only ──── cap
    one key holds at most  per_key = max(1, floor(cap * limits.max_key_share))
    reserve = floor(cap * limits.admin_reserve_share)

A key at its share gets 429 ``key_share_exceeded``; any key at the cap, and a key that is not
an admin key at ``cap - reserve``, gets 503 ``at_capacity``; both name the cap, the share and
what the key holds, with ``Retry-After``. With only the admin key configured there is nobody
to share with: it may hold the whole cap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from app.errors import AtCapacity, GatewayError, KeyShareExceeded
from app.limits import LimitsSettings
from app.runtime.commands import GATEWAY, Issuer
from app.settings import Settings

CAP_RETRY_AFTER_S = 5.0
"""The ``Retry-After`` of a refusal at a cap or a share (a slot frees when a stream or a turn
ends)."""


def admin_keys(settings: Settings) -> frozenset[str]:
    """The names of the keys with admin rights: the admin key and admin ``server.api_keys``."""
    return frozenset({GATEWAY.name, *(k.name for k in settings.server.api_keys if k.admin)})


def holder_of(owner: str | None, admins: Iterable[str]) -> Issuer:
    """The key a session's processes count for; a session without an owner is the admin
    key's."""
    return GATEWAY if owner is None else Issuer(name=owner, admin=owner in admins)


@dataclass(frozen=True, kw_only=True)
class SharedCap:
    """One global cap and how it is divided between keys."""

    setting: str
    """The cap's setting under ``limits.`` (``max_subscribers``)."""
    noun: str
    """What it counts, plural (``event subscribers``)."""
    cap: int
    key_share: float = 1.0
    admin_reserve: float = 0.0
    retry_after_s: float = CAP_RETRY_AFTER_S

    @classmethod
    def of(cls, settings: Settings, *, setting: str, noun: str) -> SharedCap:
        """The cap ``limits.<setting>`` as ``settings`` divides it."""
        limits: LimitsSettings = settings.limits
        shared = bool(settings.server.api_keys)
        return cls(
            setting=setting,
            noun=noun,
            cap=int(getattr(limits, setting)),
            key_share=limits.max_key_share if shared else 1.0,
            admin_reserve=limits.admin_reserve_share if shared else 0.0,
        )

    @property
    def per_key(self) -> int:
        """The most one key may hold."""
        return max(1, math.floor(self.cap * self.key_share))

    @property
    def divided(self) -> bool:
        """One key may hold less than the whole cap (else only the cap itself refuses)."""
        return self.per_key < self.cap

    @property
    def reserve(self) -> int:
        """The top of the cap only admin keys may take."""
        return math.floor(self.cap * self.admin_reserve)

    def limit_for(self, holder: Issuer) -> int:
        """How far the total may go with one more for ``holder`` (its share aside)."""
        return self.cap if holder.admin else self.cap - self.reserve

    def over_share(self, holder: Issuer, *, held: int) -> KeyShareExceeded:
        return KeyShareExceeded(
            f"this key ({holder.name}) already holds {held} of the {self.cap} {self.noun} this "
            f"gateway may have (limits.{self.setting}); one key may hold {self.per_key} of "
            f"them (limits.max_key_share = {self.key_share:g}): close one or retry later",
            retry_after_s=self.retry_after_s,
            limit=self.per_key,
            cap=self.setting,
            share=self.key_share,
            held=held,
        )

    def full(self, holder: Issuer, *, total: int, held: int) -> AtCapacity:
        if total >= self.cap:
            detail = (
                f"the gateway has its maximum of {self.cap} {self.noun} (limits.{self.setting}); "
                "retry later"
            )
        else:
            detail = (
                f"{total} of the {self.cap} {self.noun} this gateway may have "
                f"(limits.{self.setting}) are taken and the last {self.reserve} are kept for "
                f"admin keys (limits.admin_reserve_share = {self.admin_reserve:g}); retry later"
            )
        return AtCapacity(
            detail,
            retry_after_s=self.retry_after_s,
            limit=self.cap if total >= self.cap else self.cap - self.reserve,
            cap=self.setting,
            reserve=0 if total >= self.cap else self.reserve,
            held=held,
        )

    def refusal(self, holder: Issuer, *, total: int, held: int) -> GatewayError | None:
        """Why ``holder``, holding ``held`` of ``total``, may not take one more; None if it may."""
        if self.divided and held >= self.per_key:
            return self.over_share(holder, held=held)
        if total >= self.limit_for(holder):
            return self.full(holder, total=total, held=held)
        return None


def stream_cap(settings: Settings) -> SharedCap:
    """``limits.max_subscribers``, shared between the keys."""
    return SharedCap.of(settings, setting="max_subscribers", noun="event subscribers")


def process_cap(settings: Settings) -> SharedCap:
    """``limits.max_live_processes``, shared between the keys."""
    return SharedCap.of(settings, setting="max_live_processes", noun="live CLI processes")


def subscriber_cap(cap: int | SharedCap | None) -> SharedCap | None:
    """``limits.max_subscribers`` as the event log counts it: a bare number is shared by
    nobody (every key may hold all of it)."""
    if isinstance(cap, int):
        return SharedCap(setting="max_subscribers", noun="event subscribers", cap=cap)
    return cap


class Tally:
    """How much of one ``SharedCap`` is held: in all and per key (the event log's streams)."""

    def __init__(self, cap: SharedCap | None) -> None:
        self.cap = cap
        """None: nothing is capped (counted all the same)."""
        self.total = 0
        self._held: dict[str, int] = {}

    def held(self, key: str) -> int:
        return self._held.get(key, 0)

    def check(self, holder: Issuer | None) -> None:
        """Raise the refusal for one more held by ``holder``; without a holder only the cap
        itself applies."""
        if self.cap is None:
            return
        if holder is None:
            if self.total >= self.cap.cap:
                raise self.cap.full(GATEWAY, total=self.total, held=0)
            return
        refusal = self.cap.refusal(holder, total=self.total, held=self.held(holder.name))
        if refusal is not None:
            raise refusal

    def add(self, holder: Issuer | None) -> None:
        self.total += 1
        if holder is not None:
            self._held[holder.name] = self.held(holder.name) + 1

    def remove(self, holder: Issuer | None) -> None:
        self.total -= 1
        if holder is not None:
            left = self.held(holder.name) - 1
            if left > 0:
                self._held[holder.name] = left
            else:
                self._held.pop(holder.name, None)
