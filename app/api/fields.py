"""The types of single request fields: paths, names, refs and timestamps, each with the rules
the API document states for it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    Field,
    StringConstraints,
    WithJsonSchema,
)

from app.providers.catalog import CATALOG, descriptor, known_names
from app.providers.descriptor import ProviderDescriptor
from app.settings import MEMBER_PATTERN, NAME_PATTERN

WORKSPACE_PATTERN = r"^(/+([^/\x00.][^/\x00]*|\.([^/\x00.][^/\x00]*)?|\.\.[^/\x00]+))*/*$"
"""An absolute path with no ``..`` segment and no NUL byte, in the document: the lexical rules
``resolve_workspace`` applies (and words as ``workspace_rejected``) before it resolves the path
inside the roots, which no schema can state."""

Workspace = Annotated[
    str,
    StringConstraints(min_length=1, max_length=4096),
    Field(json_schema_extra={"pattern": WORKSPACE_PATTERN}),
]
"""A directory inside one of the gateway's workspace roots (absolute, no ``..``, no NUL)."""


def _catalogued(name: str) -> str:
    if descriptor(name) is None:
        raise ValueError(f"unknown provider; this gateway knows {known_names()}")
    return name


def provider_name_schema(catalog: Mapping[str, ProviderDescriptor] = CATALOG) -> dict[str, Any]:
    """The JSON schema of a provider name: the catalog's names, and its families' members."""
    names = [name for name, d in catalog.items() if not d.family]
    families = [name for name, d in catalog.items() if d.family]
    if not families:
        return {"type": "string", "enum": names}
    member = f"^({'|'.join(families)}):{MEMBER_PATTERN}$"
    return {"type": "string", "anyOf": [{"enum": names}, {"pattern": member}]}


ProviderName = Annotated[
    str,
    AfterValidator(_catalogued),
    WithJsonSchema(provider_name_schema()),
]
"""A provider of the catalog (``app.providers.catalog``): the names the document lists."""

StrategyName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
"""A retry strategy the gateway's configuration defines (``retry.strategies``)."""

ModelName = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,199}$"),
]
"""A model name as the CLIs accept it; never starts with a dash (it must not read as a flag)."""

_RFC3339_START = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}")


def _timestamp_text(value: object) -> object:
    # pydantic would also read a bare number as Unix time and a date as its midnight.
    if isinstance(value, str) and not _RFC3339_START.match(value):
        raise ValueError("must be an RFC 3339 date-time with a time zone: 2025-01-31T12:00:00Z")
    return value


def _in_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # 0001-01-01T00:00+01:00 is before, 9999-12-31T23:59-01:00 after, any time Python (and
        # so the store) can hold: the earliest or latest one compares the same way.
        earliest, latest = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
        return earliest if value.year == 1 else latest


Timestamp = Annotated[AwareDatetime, BeforeValidator(_timestamp_text), AfterValidator(_in_utc)]
"""A request timestamp: RFC 3339 with a time zone (a naive one cannot be compared)."""


GitRef = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=256, pattern=r"^[^\x00-\x20\x7f~^:?*\[\\-][^\x00-\x20\x7f]*$"
    ),
]
"""A Git revision (a branch, tag or commit, ``main~2``); never starts with a dash."""

BranchName = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x20\x7f~^:?*\[\\-][^\x00-\x20\x7f~^:?*\[\\]*$",
    ),
]
"""A new branch's name (``git check-ref-format`` has the last word)."""

IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"
"""An idempotency key: 1 to 255 visible ASCII characters (a UUID, say; no spaces)."""

IdempotencyKeyText = Annotated[
    str, StringConstraints(min_length=1, max_length=255, pattern=IDEMPOTENCY_KEY_PATTERN)
]
"""A client's key for a request it may send again (docs/api.md, "Idempotency keys")."""
