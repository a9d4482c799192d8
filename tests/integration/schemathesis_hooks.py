"""Schemathesis checks of our own, loaded by the fuzzing test (``SCHEMATHESIS_HOOKS``).

``keyless_requests_are_refused``: for a run that sends no gateway key, every operation the
document marks as keyed answers 401 ``application/problem+json`` — whatever else is wrong
with the request (an invalid body, a missing session), so a caller without a key learns
nothing about the API beyond "send a key". Only the gate answers first: a body over
``server.max_body_bytes`` is 413 for anyone.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis import Case, CheckContext, Response


@schemathesis.check
def keyless_requests_are_refused(
    ctx: CheckContext, response: Response, case: Case[Any]
) -> bool | None:
    if not case.operation.definition.raw.get("security"):
        return None  # /healthz answers without a key
    if case.method.upper() != case.operation.method.upper():
        return None  # an undocumented method is refused by the router first (405)
    label = case.operation.label
    if response.status_code == 413:
        return True  # the gate refuses an oversize body before anything else, key or not
    if response.status_code != 401:
        raise AssertionError(f"{label} answered {response.status_code} to a request without a key")
    content_type = response.headers.get("content-type", [""])[0]
    if content_type != "application/problem+json":
        raise AssertionError(f"{label} refused a keyless request as {content_type!r}")
    body = json.loads(response.content)
    if body.get("status") != 401 or not str(body.get("type", "")).endswith(":unauthorized"):
        raise AssertionError(f"{label} refused a keyless request with {body}")
    return True
