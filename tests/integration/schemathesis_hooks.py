"""Schemathesis hooks and checks of our own, loaded by the fuzzing test (``SCHEMATHESIS_HOOKS``).

``map_case`` gives the facts only the deployment knows their values in *positive* cases, so
that every other schema-valid request must be accepted (check ST202): the workspace (the
document says absolute, no ``..``, no NUL; which directories exist inside the gateway's roots
only the gateway knows) becomes ``$FUZZ_WORKSPACE``, a retry strategy name one the gateway
defines (``default``), and an event cursor ``0`` (one past the newest event of *that* session
is refused). A new session names exactly one place to work in (a rule stated in words rather
than in the schema): the workspace, never a repository (which repositories exist under the
roots is the deployment's fact too; tests/integration/test_worktrees.py covers them). One more
cross-field rule, stated in words rather than in the schema, is kept too: an
explicit ``provider`` is asked only for capabilities it has (``$FUZZ_CAPABILITIES``, from
``GET /v1/providers``; asking more is a 422 ``capabilities_unmet``), and without one, ``requires``
keeps what one configured provider has (which providers exist is the deployment's fact: a
family member the document allows by pattern, ``acp:<name>``, that the gateway does not
configure becomes the configured provider with the most capabilities).
A webhook endpoint's URL (which hosts it may be on), its keys and its secret's byte count are
the deployment's facts or rules stated in words: a positive new endpoint is on loopback, with
no keys and a secret the gateway makes.
The turns of a session are the deployment's fact too: a positive fork forks at the default
point, a positive changes query reads from ``start`` to ``now``, and no positive revert is
sent (``filter_case``). What a session requires of its provider is its own fact: a positive
change of provider names one that has every capability. An ``Idempotency-Key`` names one
request, so a positive case gets a key of its own (one the generator reused for another body
is a 422 ``idempotency_key_reused``, tests/integration/test_idempotency.py). Negative cases
are left as generated.

``keyless_requests_are_refused``: for a run that sends no gateway key, every operation the
document marks as keyed answers 401 ``application/problem+json`` — whatever else is wrong
with the request (an invalid body, a missing session), so a caller without a key learns
nothing about the API beyond "send a key". Only the gate answers first: a body over
``server.max_body_bytes`` is 413 for anyone.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import schemathesis
from schemathesis import Case, CheckContext, Response

from app.settings import RetrySettings


@schemathesis.hook
def map_case(context: Any, case: Case[Any]) -> Case[Any]:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return case
    if isinstance(case.body, dict):
        if case.operation.definition.raw.get("operationId") == "createSession":
            for name in ("repository", "ref", "branch"):
                case.body.pop(name, None)
            case.body["workspace"] = os.environ["FUZZ_WORKSPACE"]
        if "workspace" in case.body:
            case.body["workspace"] = os.environ["FUZZ_WORKSPACE"]
        retry = case.body.get("retry")
        if isinstance(retry, dict) and isinstance(retry.get("strategy"), str):
            retry["strategy"] = "default"
        wait = retry.get("usage_limit_max_wait_s") if isinstance(retry, dict) else None
        if isinstance(retry, dict) and isinstance(wait, int | float):
            # The document allows what any gateway may be configured to; this one's ceiling
            # (retry.usage_limit_max_wait_s, the default; more is a 422) is its own fact.
            retry["usage_limit_max_wait_s"] = min(wait, RetrySettings().usage_limit_max_wait_s)
        provider, requires = case.body.get("provider"), case.body.get("requires")
        capabilities: dict[str, list[str]] = json.loads(os.environ["FUZZ_CAPABILITIES"])
        if isinstance(provider, str) and provider not in capabilities:
            # A family member the document allows by pattern (acp:<name>) that this gateway
            # does not configure: which ones it does is the deployment's fact.
            provider = case.body["provider"] = max(capabilities, key=lambda p: len(capabilities[p]))
        if isinstance(requires, list):
            if isinstance(provider, str):
                has = capabilities[provider]
            else:  # the provider with the most of them serves
                has = max(capabilities.values(), key=lambda c: len(set(c) & set(requires)))
            case.body["requires"] = [name for name in requires if name in has]
    if case.headers:
        for name in [n for n in case.headers if n.lower() == "idempotency-key"]:
            case.headers[name] = f"fuzz-{uuid.uuid4()}"
    operation = case.operation.definition.raw.get("operationId")
    if operation == "configureSession" and isinstance(case.body, dict):
        _taking_over(case.body, json.loads(os.environ["FUZZ_CAPABILITIES"]))
    if operation in ("createWebhook", "rotateWebhookSecret") and isinstance(case.body, dict):
        # Which hosts an endpoint may be on, and which keys exist, are the deployment's facts
        # (the fuzzed gateway allows loopback only, where nothing listens on port 9); a
        # secret's byte count is a rule stated in words: the gateway makes one.
        if operation == "createWebhook":
            case.body["url"] = "http://127.0.0.1:9/hook"
        case.body.pop("keys", None)
        case.body.pop("secret", None)
    if operation == "forkSession" and isinstance(case.body, dict):
        case.body.pop("at_turn", None)  # the default point: which turns exist is not known
    if operation == "getChanges" and case.query:
        for name, moment in (("from", "start"), ("to", "now")):
            if name in case.query:
                case.query[name] = moment
    if case.operation.definition.raw.get("operationId") == "getUsage" and case.query:
        _nonempty_range(case.query)
    if case.operation.definition.raw.get("operationId") == "getEvents":
        if case.query and "after" in case.query:
            case.query["after"] = 0
        if case.headers:
            for name in [n for n in case.headers if n.lower() == "last-event-id"]:
                case.headers[name] = "0"
    return case


@schemathesis.hook
def filter_case(context: Any, case: Case[Any]) -> bool:
    """No positive revert is sent: it names a turn of the session, and which turns a session
    has is the deployment's fact (a generated id is a 404, which the stateful phase would
    read as the session itself missing). tests/integration/test_changes.py covers revert."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return True
    operation: object = case.operation.definition.raw.get("operationId")
    return operation != "revertSession"


def _taking_over(body: dict[str, Any], capabilities: dict[str, list[str]]) -> None:
    """A positive change of provider names one with every capability a session may require
    (what the session requires is its own fact); without one, the provider stays."""
    if "provider" not in body:
        return
    every = set().union(*capabilities.values())
    able = [name for name, has in capabilities.items() if set(has) >= every]
    if able:
        body["provider"] = able[0]
    else:
        del body["provider"]
        body.setdefault("approval_mode", "ask")


def _nonempty_range(query: dict[str, Any]) -> None:
    since, until = _moment(query.get("from")), _moment(query.get("to"))
    if until is not None and until < datetime.min.replace(tzinfo=UTC) + timedelta(days=31):
        query["to"] = "2000-01-01T00:00:00Z"
        until = _moment(query["to"])
    if since is not None and since > (until or datetime.now(UTC)):
        del query["from"]


def _moment(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
        return moment.astimezone(UTC) if moment.tzinfo else None
    except (ValueError, OverflowError):
        return None


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
