"""Typed reads of values from the CLI's raw JSON: wrong types become ``None`` or a default."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import JsonValue


def parse_json(text: bytes | str) -> Any:
    """One JSON document a CLI printed (a stdout line, an SSE ``data`` field).

    orjson parses the lines of a streaming CLI several times faster than the standard
    library; what it refuses and ``json`` takes (``NaN``, ``1e999``, lone surrogates, nesting
    past 1,024) is parsed by ``json``, so both read the same documents. Raises ``ValueError``
    (or ``RecursionError``) for anything that is not JSON.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def as_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def as_opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_int(value: object, default: int = 0) -> int:
    number = as_opt_int(value)
    return default if number is None else number


def as_number(value: object) -> float | None:
    """A finite JSON number as float (json.loads turns 1e999 into inf)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def merged(base: Mapping[str, JsonValue], top: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """``base`` with ``top`` layered over it: tables merged key by key, anything else replaced
    (a CLI's own settings under the operator's ``config`` under the gateway's requirements)."""
    result = dict(base)
    for key, value in top.items():
        below = result.get(key)
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            result[key] = merged(below, value)
        else:
            result[key] = value
    return result


def as_unix_time(value: object) -> datetime | None:
    """A Unix time in seconds as a UTC datetime; None for anything else or out of range."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
