"""The OpenAPI document as clients code against it: FastAPI's, completed with the errors.

Routes declare the errors only they can return (``problems(404, 409, …)``). What every
route shares is added here, from the route itself, so a new route cannot forget it:

- every operation: ``403`` (the gate refuses a foreign ``Host`` or ``Origin``);
- an operation with a request body: ``413`` (over ``server.max_body_bytes``);
- an operation with parameters or a body: ``422`` (a ``ValidationProblem``, replacing
  FastAPI's own validation schema, which this gateway never sends);
- an operation behind a key: ``401``, ``429`` (the auth-failure backoff) and the
  ``bearer`` security requirement.

Every error is ``application/problem+json`` with the ``Problem`` schema (``ValidationProblem``
for 422). ``app.openapi()`` answers the completed document once ``install`` has run.

A request's ``provider`` is stated as this gateway accepts it: the document of an app lists
the providers its settings enable (``enum``), not every name the catalog knows.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic.json_schema import models_json_schema

from app.api.schemas import Problem, ValidationProblem, provider_name_schema
from app.api.security import AUTH_DEPENDENCIES

PROBLEM_MEDIA_TYPE = "application/problem+json"
SCHEMAS = "#/components/schemas/"
BEARER = "bearer"

DESCRIPTIONS: Mapping[int, str] = {
    401: "Missing or wrong key",
    403: "Host or Origin not allowed, or the key may not do this",
    404: "No such resource (or not yours)",
    409: "The resource's state forbids the request",
    410: "The cursor is older than the events kept",
    413: "Request body over server.max_body_bytes",
    422: "Invalid request",
    429: "A rate or subscriber limit was reached, or too many failed authentications "
    "from this address (see Retry-After)",
    503: "The gateway cannot serve the request now (see Retry-After)",
}

Responses = dict[int | str, dict[str, Any]]


def problem_response(description: str, schema: str = "Problem") -> dict[str, Any]:
    """One error response: ``application/problem+json`` with the named problem schema."""
    return {
        "description": description,
        "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": SCHEMAS + schema}}},
    }


def problems(*statuses: int, notes: Mapping[int, str] | None = None) -> Responses:
    """The ``responses=`` of a route for the errors it can return; ``notes`` override (and
    add) descriptions by status."""
    described = {status: DESCRIPTIONS[status] for status in statuses} | dict(notes or {})
    return {status: problem_response(text) for status, text in sorted(described.items())}


def links(*operation_ids: str, **parameters: str) -> dict[str, Any]:
    """OpenAPI links from a response to operations that take its ids: ``parameters`` maps
    each of their path parameters to the response field that fills it."""
    filled = {name: f"$response.body#/{field}" for name, field in parameters.items()}
    return {"links": {op: {"operationId": op, "parameters": dict(filled)} for op in operation_ids}}


def every_route(routes: list[Any]) -> Iterator[object]:
    """Every route, with those of included routers (FastAPI keeps them nested)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from every_route(list(included.routes))
        else:
            yield route


def _routes(routes: list[Any]) -> Iterator[APIRoute]:
    """The routes the document describes."""
    for route in every_route(routes):
        if isinstance(route, APIRoute) and route.include_in_schema:
            yield route


def _calls(dependant: Any) -> Iterator[object]:
    yield dependant.call
    for child in dependant.dependencies:
        yield from _calls(child)


def _authenticated(route: APIRoute) -> bool:
    return any(call in AUTH_DEPENDENCIES for call in _calls(route.dependant))


def _operation_id(route: APIRoute) -> str:
    return route.operation_id or route.unique_id


def complete(document: dict[str, Any], routes: list[Any]) -> dict[str, Any]:
    """Add the shared error responses, the problem schemas and the security scheme."""
    authenticated = {_operation_id(r): _authenticated(r) for r in _routes(routes)}
    for item in document.get("paths", {}).values():
        for operation in item.values():
            _complete_operation(operation, authenticated.get(operation.get("operationId"), True))
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):  # FastAPI's, never sent here
        schemas.pop(name, None)
    _, definitions = models_json_schema(
        [(Problem, "serialization"), (ValidationProblem, "serialization")],
        ref_template=SCHEMAS + "{model}",
    )
    schemas.update(definitions.get("$defs", {}))
    components["securitySchemes"] = {
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "A gateway key: `server.token` (admin), the generated token file, "
            "or a `server.api_keys` entry. Browsers' EventSource and WebSocket may send it as "
            "`?access_token=` on the SSE events URL and the WebSocket URL only.",
        }
    }
    return document


def _without_null(parameter: dict[str, Any]) -> None:
    """An optional parameter is one a client leaves out: a query string or a header has no
    ``null``, so FastAPI's ``anyOf [T, null]`` for ``T | None`` is published as ``T``."""
    schema: dict[str, Any] = parameter.get("schema", {})
    members = schema.get("anyOf")
    if members is None:
        return
    kept = [m for m in members if m != {"type": "null"}]
    if len(kept) == 1 and len(members) == 2:
        del schema["anyOf"]
        schema.update(kept[0])


def _complete_operation(operation: dict[str, Any], authenticated: bool) -> None:
    for parameter in operation.get("parameters", []):
        _without_null(parameter)
    responses: dict[str, Any] = operation.setdefault("responses", {})
    shared: dict[str, dict[str, Any]] = {"403": problem_response(DESCRIPTIONS[403])}
    if "requestBody" in operation:
        shared["413"] = problem_response(DESCRIPTIONS[413])
    validation = responses.get("422", {}).get("content", {}).get("application/json", {})
    if validation.get("schema") == {"$ref": SCHEMAS + "HTTPValidationError"}:
        del responses["422"]
    if operation.get("parameters") or "requestBody" in operation:
        described = responses.get("422", {}).get("description", DESCRIPTIONS[422])
        responses["422"] = problem_response(described, "ValidationProblem")
    if authenticated:
        shared["401"] = problem_response(DESCRIPTIONS[401])
        shared["429"] = problem_response(DESCRIPTIONS[429])
        operation["security"] = [{BEARER: []}]
    else:
        operation["security"] = []
    for status, response in shared.items():
        responses.setdefault(status, response)


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` answer the completed document (rebuilt when routes change)."""
    built: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def openapi() -> dict[str, Any]:
        raw = FastAPI.openapi(app)  # FastAPI caches it until the routes change
        if not built or built[0][0] is not raw:
            document = complete(copy.deepcopy(raw), list(app.routes))
            enabled = [n for n, p in app.state.settings.providers.items() if p.enabled]
            built[:] = [(raw, accepted_providers(document, enabled))]
        return built[0][1]

    # Replacing ``app.openapi`` is FastAPI's documented way to extend the document.
    app.openapi = openapi  # type: ignore[method-assign]


def accepted_providers(document: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """``document`` with each provider name of a request (the catalog's schema) narrowed to
    ``names``, the providers this gateway serves."""
    catalog = provider_name_schema()
    accepted = {"type": "string", "enum": names}

    def narrow(node: Any) -> Any:
        if node == catalog:
            return copy.deepcopy(accepted)
        if isinstance(node, dict):
            return {key: narrow(value) for key, value in node.items()}
        if isinstance(node, list):
            return [narrow(item) for item in node]
        return node

    narrowed: dict[str, Any] = narrow(document)
    return narrowed
