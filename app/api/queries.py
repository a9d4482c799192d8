"""Query strings carry only the parameters an operation takes.

An unknown one (``?limt=5``, ``?befor=…``) is refused as a 422 that names what the operation
does take, like an unknown field in a request body, rather than ignored while the request is
answered as if it had not been sent. Checked once the caller is authenticated, so a caller
without a key learns nothing about the API but "send a key".
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError


def refuse_unknown_query(request: Request, *, also: frozenset[str] = frozenset()) -> None:
    """Raise ``RequestValidationError`` (422) naming each query parameter the route does not
    declare; ``also`` adds names read outside the route's parameters (``access_token``)."""
    if not request.query_params:
        return
    dependant: Dependant | None = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return
    known = frozenset(_query_names(dependant)) | also
    unknown = sorted(set(request.query_params.keys()) - known)
    if not unknown:
        return
    takes = (
        f"this operation takes {', '.join(sorted(known))}" if known else "this operation takes none"
    )
    raise RequestValidationError(
        [
            {
                "type": "extra_forbidden",
                "loc": ("query", name[:64]),
                "msg": f"unknown query parameter; {takes}",
            }
            for name in unknown
        ]
    )


def _query_names(dependant: Dependant) -> Iterator[str]:
    for parameter in dependant.query_params:
        yield parameter.alias
    for sub in dependant.dependencies:
        yield from _query_names(sub)
