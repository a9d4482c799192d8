"""``GET /v1/usage``: what every key's turns used over a time range (admin keys only).

The numbers are summed on read from the turns themselves (``app/store/usage.py``), in one
aggregate query, so they agree with the sessions' own ``usage`` and cannot drift.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.budgetviews import key_budget
from app.api.contract import problems
from app.api.deps import Manager, usage_public
from app.api.schemas import Timestamp, UsageGroupPublic, UsageReport
from app.api.security import Authenticated
from app.errors import Forbidden, InvalidRequest
from app.records import UsageGroup, UsageTotals
from app.runtime import reads
from app.runtime.budgets import key_periods

DEFAULT_RANGE = timedelta(days=30)
"""The range a report covers when ``from`` is left out: this long before ``to``."""

router = APIRouter(prefix="/v1/usage", tags=["usage"])


@router.get(
    "",
    operation_id="getUsage",
    responses=problems(
        notes={
            403: "Host or Origin not allowed, or the key is not an admin key",
            422: "`from` or `to` is not an RFC 3339 date-time with a time zone, or `from` is "
            "after `to` (`from` = `to` is an empty range: zero totals)",
            503: "The database cannot be read now",
        }
    ),
)
async def get_usage(
    manager: Manager,
    principal: Authenticated,
    from_: Annotated[
        Timestamp | None,
        Query(
            alias="from",
            description="Start of the range, inclusive (default: 30 days before `to`)",
        ),
    ] = None,
    to: Annotated[
        Timestamp | None, Query(description="End of the range, exclusive (default: now)")
    ] = None,
) -> UsageReport:
    """Token counts and cost of the turns that ended in ``[from, to)``, by key, provider
    and model; ``from`` = ``to`` is the empty range (no groups, zero totals). ``budgets``:
    every key's budgets for the current UTC day and month, with what is used and left."""
    if not principal.admin:
        raise Forbidden(
            "usage covers every key's sessions: ask with an admin key "
            "(server.token, or an api_keys entry with admin = true); a session's own usage "
            "is on GET /v1/sessions/{id}"
        )
    until = to if to is not None else manager.clock()
    since = from_ if from_ is not None else _before(until, DEFAULT_RANGE)
    if since > until:
        raise InvalidRequest(
            f"from ({since.isoformat()}) must not be after to ({until.isoformat()}): the "
            "range is [from, to)",
            range_from=since.isoformat(),
            range_to=until.isoformat(),
        )
    groups = await reads.usage_report(manager, since=since, until=until)
    return UsageReport(
        from_=since,
        to=until,
        groups=[
            UsageGroupPublic(
                key=group.key,
                provider=group.provider,
                model=group.model,
                usage=usage_public(group.totals),
            )
            for group in groups
        ],
        total=usage_public(_total(groups)),
        budgets=[
            key_budget(period)
            for period in await key_periods(manager.store, manager.settings, manager.clock())
        ],
    )


def _before(moment: datetime, span: timedelta) -> datetime:
    try:
        return moment - span
    except OverflowError:
        return datetime.min.replace(tzinfo=moment.tzinfo)


def _total(groups: list[UsageGroup]) -> UsageTotals:
    costs = [g.totals.cost_usd for g in groups if g.totals.cost_usd is not None]
    return UsageTotals(
        input_tokens=sum(g.totals.input_tokens for g in groups),
        output_tokens=sum(g.totals.output_tokens for g in groups),
        cached_input_tokens=sum(g.totals.cached_input_tokens for g in groups),
        cache_creation_input_tokens=sum(g.totals.cache_creation_input_tokens for g in groups),
        cost_usd=sum(costs) if costs else None,
        turns=sum(g.totals.turns for g in groups),
    )
