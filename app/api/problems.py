"""Every error becomes ``application/problem+json`` here, and only here."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import contract
from app.api.security import authentication_failure
from app.api.text import printable
from app.errors import GatewayError, internal_error, problem, problem_for

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
MAX_REPORTED_ERRORS = 20
MAX_LOCATION_CHARS = 200


def _response(
    body: Mapping[str, object], status: int, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def error_headers(exc: GatewayError) -> dict[str, str]:
    """``Retry-After`` for errors that carry a wait, in whole seconds (at least 1)."""
    if exc.retry_after_s is None:
        return {}
    return {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}


async def _gateway_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GatewayError)
    return _response(problem_for(exc), exc.status, error_headers(exc))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # A body that is not JSON is refused before the route's dependencies run; a caller
    # without a valid key gets the 401 it would have got, not a description of the schema.
    refused = await authentication_failure(request)
    if refused is not None:
        return _response(problem_for(refused), refused.status, error_headers(refused))
    errors = [
        {
            "location": printable(".".join(str(p) for p in e.get("loc", ())))[:MAX_LOCATION_CHARS],
            "message": printable(str(e.get("msg", "")))[:300],
        }
        for e in exc.errors()[:MAX_REPORTED_ERRORS]
    ]
    detail = "; ".join(f"{e['location']}: {e['message']}" for e in errors[:3])
    return _response(
        problem(
            status=422,
            type_="validation_failed",
            title="Request validation failed",
            detail=detail or "the request does not match the schema",
            errors=errors,  # type: ignore[arg-type]
        ),
        422,
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.__cause__ is not None:
        # FastAPI answers a body it could not parse (not UTF-8, nested past the parser's depth
        # limit) with a bare 400; like JSON that does not parse, it is a 422 here, and a caller
        # without a valid key gets the 401 it would have got.
        refused = await authentication_failure(request)
        if refused is not None:
            return _response(problem_for(refused), refused.status, error_headers(refused))
        if isinstance(exc.__cause__, RecursionError):
            detail = "the JSON body nests too deeply; send a flatter document"
        else:
            detail = "the body is not a JSON document in UTF-8"
        return _response(
            problem(
                status=422,
                type_="validation_failed",
                title="Request validation failed",
                detail=detail,
                errors=[{"location": "body", "message": detail}],
            ),
            422,
        )
    slug = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return _response(
        problem(status=exc.status_code, type_=slug, title=str(exc.detail), detail=str(exc.detail)),
        exc.status_code,
        headers,
    )


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (the router's own 405 names only the
    first route that matched the path)."""
    methods: set[str] = set()
    for route in contract.every_route(list(request.app.routes)):
        if isinstance(route, BaseRoute) and route.matches(request.scope)[0] != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def _internal(method: str, path: str, exc: Exception) -> JSONResponse:
    """The id-only answer to an unexpected error, logged under that id."""
    error = internal_error(log, f"{method} {path}", exc)
    return _response(problem_for(error), error.status)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    return _internal(request.method, request.url.path, exc)


class UnexpectedErrors:
    """Answers an exception no handler took with the id-only 500 problem, and ends the
    request there.

    Starlette's last-resort handler answers and then raises again for the server, which logs
    the traceback a second time (without the id) and closes the connection under the client's
    next request. A response already under way (a stream) cannot be answered: that exception
    goes on to the server, which cuts the connection.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:
                raise
            await _internal(scope["method"], scope["path"], exc)(scope, receive, send)


def install(app: FastAPI) -> None:
    """Answer every error as a problem, and publish those answers in the OpenAPI document."""
    app.add_exception_handler(GatewayError, _gateway_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    contract.install(app)
