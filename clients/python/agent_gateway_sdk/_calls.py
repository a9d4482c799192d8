"""Requests as data: each API call is a ``Call`` (method, path, query, body, the model its
answer is read into), built here once and sent by the sync or the async client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from agent_gateway_sdk._version import __version__
from agent_gateway_sdk.errors import UnexpectedResponse, error_for

T = TypeVar("T")

USER_AGENT = f"agent-gateway-sdk-python/{__version__}"
DEFAULT_URL = "http://127.0.0.1:8765"


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    reads: TypeAdapter[T]
    """How the answer's JSON becomes the result (``unwrap`` first, when set)."""
    params: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    unwrap: str | None = None
    """The member of the answer that is the result (``{"sessions": [...]}`` → the list)."""
    timeout: httpx.Timeout | None = None
    text: bool = False
    """The answer is text (a patch), not JSON."""
    accept: frozenset[int] = frozenset()
    """Error statuses whose body is still the result (``/readyz`` answers 503 with one)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Request headers besides the key (``Idempotency-Key``)."""


def segment(value: str) -> str:
    """A path segment, escaped (an id is never a path)."""
    return quote(value, safe="")


def query(**values: object) -> dict[str, str]:
    """Query parameters, leaving out the ones not given."""
    params: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            params[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            params[name] = value.isoformat()
        else:
            params[name] = str(value)
    return params


def body(**values: object) -> dict[str, Any]:
    """A JSON body of the fields given (``None`` means "not given": the gateway's default)."""
    result: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, BaseModel):
            result[name] = value.model_dump(mode="json", exclude_none=True, by_alias=True)
        elif isinstance(value, Mapping):
            result[name] = dict(value)
        elif isinstance(value, Sequence) and not isinstance(value, str):
            result[name] = [
                v.model_dump(mode="json", exclude_none=True) if isinstance(v, BaseModel) else v
                for v in value
            ]
        else:
            result[name] = value
    return result


def build(client: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    kwargs: dict[str, Any] = {"params": call.params}
    if call.body is not None:
        kwargs["json"] = call.body
    if call.timeout is not None:
        kwargs["timeout"] = call.timeout
    if call.headers:
        kwargs["headers"] = call.headers
    return client.build_request(call.method, call.path, **kwargs)


def result(call: Call[T], response: httpx.Response) -> T:
    """The call's result from a read answer, or the ``ApiError`` it stands for."""
    if response.status_code >= 400 and response.status_code not in call.accept:
        raise error_for(response.status_code, response.content, dict(response.headers))
    try:
        if call.text:
            return call.reads.validate_python(response.text)
        value = response.json()
        if call.unwrap is not None:
            value = value[call.unwrap]
        return call.reads.validate_python(value)
    except (ValueError, KeyError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        raise UnexpectedResponse(
            f"{call.method} {call.path} answered {response.status_code} with what this SDK "
            f"cannot read: {exc}"
        ) from exc


def headers(token: str | None) -> dict[str, str]:
    found = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        found["Authorization"] = f"Bearer {token}"
    return found
