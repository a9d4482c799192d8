"""T29: the operator's ``retry.usage_limit_max_wait_s`` is a ceiling on every usage-limit wait.

A request (a session's or a turn's ``retry``) may ask for a shorter wait, never a longer one:
longer is a 422 that names the ceiling. A session's own wait, stored under an earlier, higher
ceiling, is cut to the current one, so no turn waits longer than the operator allows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import JsonValue

from app.errors import InvalidRequest
from app.events import TurnError
from app.runtime.coordinator import USAGE_RESET_MARGIN_S, resolve_policy, usage_wait
from app.settings import RetrySettings

CEILING = 600.0
SETTINGS = RetrySettings(usage_limit="wait", usage_limit_max_wait_s=CEILING)
WEEK = 7 * 24 * 3600
NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


@pytest.mark.parametrize("asked", [CEILING + 1, 3600, WEEK])
def test_t29_a_request_may_not_wait_longer_than_the_ceiling(asked: float) -> None:
    with pytest.raises(InvalidRequest) as refused:
        resolve_policy({"usage_limit_max_wait_s": asked}, None, SETTINGS)
    assert refused.value.fields["ceiling_s"] == CEILING
    assert "600 s" in refused.value.detail
    assert "retry.usage_limit_max_wait_s" in refused.value.detail


@pytest.mark.parametrize("asked", [1, 60.5, CEILING])
def test_t29_a_request_may_wait_less_than_the_ceiling(asked: float) -> None:
    policy = resolve_policy({"usage_limit_max_wait_s": asked}, None, SETTINGS)
    assert policy.usage_limit_max_wait_s == asked


def test_t29_without_a_request_the_ceiling_is_the_wait() -> None:
    assert resolve_policy(None, None, SETTINGS).usage_limit_max_wait_s == CEILING


def test_t29_a_sessions_longer_stored_wait_is_cut_to_the_ceiling_and_not_waited() -> None:
    stored: dict[str, JsonValue] = {"usage_limit": "wait", "usage_limit_max_wait_s": WEEK}
    policy = resolve_policy(None, stored, SETTINGS)
    assert policy.usage_limit_max_wait_s == CEILING
    # A reset an hour away is past the ceiling: the turn does not wait for it.
    later = TurnError(kind="usage_limit", message="limit", resets_at=NOW + timedelta(hours=1))
    assert usage_wait(later, policy, now=NOW, can_continue=True) is None
    soon = TurnError(kind="usage_limit", message="limit", resets_at=NOW + timedelta(seconds=60))
    assert usage_wait(soon, policy, now=NOW, can_continue=True) == 60 + USAGE_RESET_MARGIN_S
