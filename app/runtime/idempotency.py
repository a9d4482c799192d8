"""Idempotency keys: a request sent again with the same ``Idempotency-Key`` (by the same API
key) gets the first answer again instead of doing its work twice, on any replica.

    begin(owner, key, request, fingerprint)
      ├─ the key is new: claim it (in flight, held by this replica) ────► Claim: answer it
      ├─ taken by another request (another fingerprint) ────────────────► 422 idempotency_key_reused
      ├─ answered, not expired ─────────────────────────────────────────► Stored: that answer
      ├─ in flight on a replica that runs (this one included) ──────────► 409 idempotency_key_in_use
      └─ expired, or in flight on a replica that stopped ─► retake it ──► Claim: answer it
    Claim.finish(answer)   a success (2xx) is kept for ``KEY_TTL``, then retention deletes it
    Claim.release()        a refusal or a failure did nothing: the key is free again

The database's primary key (owner, key) decides between copies that race, wherever they
arrive. The fingerprint is the SHA-256 of the request's canonical JSON: what was asked as the
API validated it (defaults filled in), keys sorted, no spaces, whole numbers as integers, so
two bodies that differ only in formatting, key order, ``1`` or ``1.0``, or a default spelled
out are one request.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from app.records import IdempotencyRecord
from app.settings import Settings
from app.store.interface import Storage

log = logging.getLogger(__name__)

KEY_TTL = timedelta(hours=24)
"""How long an answer is kept for its key."""
RETAKE_TRIES = 3
"""Times a copy looks again when the row it would take over changed under it."""
IN_USE_RETRY_S = 1.0
"""The ``Retry-After`` of a copy that arrives while the first is being answered."""


@dataclass(frozen=True, kw_only=True)
class Stored:
    """An answer kept for a key: what a copy of the request gets again."""

    status: int
    media_type: str
    body: str


def fingerprint(request: Any) -> str:
    """The SHA-256 of ``request`` (JSON values) as canonical JSON."""
    text = json.dumps(
        _numbers(request),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _numbers(value: Any) -> Any:
    """``value`` with each whole float as the integer it equals: JSON has one kind of
    number, so ``1`` and ``1.0`` say the same."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_numbers(item) for item in value]
    return value


@dataclass(frozen=True, kw_only=True)
class Claim:
    """This replica answers the request sent with the key; ``finish`` or ``release`` it."""

    store: Storage
    record: IdempotencyRecord
    """The row as claimed."""

    async def finish(self, answer: Stored) -> None:
        """Keep ``answer`` for copies of the request sent later."""
        kept = await self.store.finish_request(
            self.record,
            status=answer.status,
            headers={"content-type": answer.media_type},
            body=answer.body,
        )
        if not kept:  # retaken meanwhile (this replica looked stopped): the other one answers
            log.warning("the answer to an idempotent request was not kept: its key was retaken")

    async def release(self) -> None:
        """Free the key: the request did nothing a copy could repeat."""
        await self.store.release_request(self.record)


class IdempotencyKeys:
    """The idempotency keys of one replica: claims in the store, held under its name."""

    def __init__(
        self, store: Storage, settings: Settings, *, clock: Callable[[], datetime]
    ) -> None:
        self._store = store
        self._clock = clock
        self._holder = settings.cluster.replica_id
        self._clustered = settings.cluster.redis_url is not None
        self._stale_after_s = settings.cluster.lease_ttl_s

    async def begin(
        self, owner: str, key: str, *, request: str, fingerprint: str
    ) -> Claim | Stored:
        """Claim ``key`` for this request (``Claim``), or the answer kept for it (``Stored``);
        raises 422 when it was used for another request, 409 while a copy is in flight."""
        for _ in range(RETAKE_TRIES):
            now = self._clock()
            mine = IdempotencyRecord(
                owner=owner,
                key=key,
                request=request[:300],
                fingerprint=fingerprint,
                state="in_flight",
                holder=self._holder,
                created_at=now,
                expires_at=now + KEY_TTL,
            )
            found = await self._store.claim_request(mine)
            if found is None:
                return Claim(store=self._store, record=mine)
            if found.expires_at > now:
                if found.fingerprint != fingerprint:
                    raise IdempotencyKeyReused(
                        f"this Idempotency-Key was used for another request ({found.request}) "
                        "in the last 24 hours; send a new key with a new request",
                        request=found.request,
                    )
                if found.state == "done" and found.status is not None and found.body is not None:
                    media_type = (found.headers or {}).get("content-type")
                    return Stored(
                        status=found.status,
                        media_type=media_type if isinstance(media_type, str) else "",
                        body=found.body,
                    )
                if await self._alive(found.holder):
                    raise IdempotencyKeyInUse(
                        "a request with this Idempotency-Key is still being answered; send it "
                        "again once it was (see Retry-After) to get its answer",
                        retry_after_s=IN_USE_RETRY_S,
                    )
            # Expired, or its replica stopped before answering: this copy runs it, if the row
            # is still as read (else another copy won: look again).
            if await self._store.retake_request(mine, was=found):
                return Claim(store=self._store, record=mine)
        raise IdempotencyKeyInUse(
            "copies of this request keep taking its Idempotency-Key over; send it again in a "
            "moment",
            retry_after_s=IN_USE_RETRY_S,
        )

    async def _alive(self, holder: str) -> bool:
        """Whether the replica ``holder`` may still answer the request it holds. One gateway
        forgets its unanswered requests as it starts, so one it did not make is gone."""
        if holder == self._holder:
            return True
        if not self._clustered:
            return False
        return holder in await self._store.live_replicas(stale_after_s=self._stale_after_s)


async def forget_unanswered(store: Storage, settings: Settings) -> int:
    """At start: forget the requests a previous process of this gateway (or of this replica)
    was answering when it stopped; a copy sent again is then run again."""
    clustered = settings.cluster.redis_url is not None
    return await store.release_requests_of(settings.cluster.replica_id if clustered else None)
