"""What the OpenCode normalizer hands the provider besides unified event payloads.

Event payloads (``EventData``) go to the session's log as they are; the items defined here are
for the provider to act on: answer or drop permission requests, end the turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from app.events import EventData
from app.providers.base import ApprovalRequest, TurnOutcome

__all__ = ["ApprovalAsked", "ApprovalWithdrawn", "OpenCodeItem", "TurnEnded"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalAsked:
    """OpenCode waits on ``POST /permission/{request_id}/reply``."""

    request: ApprovalRequest


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalWithdrawn:
    """Permission ``request_id`` was answered (by anyone); nobody may answer it again."""

    request_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnded:
    """The thread went idle: the turn is over."""

    outcome: TurnOutcome


OpenCodeItem: TypeAlias = EventData | ApprovalAsked | ApprovalWithdrawn | TurnEnded
