"""``/v1/webhooks``: the webhook endpoints, a test message, and each endpoint's delivery log
(admin keys only: an endpoint may receive every key's events).

Endpoints from the configuration (``[[webhooks.endpoints]]``) are listed and tested here but
changed in the configuration only (409). Secrets are never shown, but once: the one the gateway
makes for an endpoint created without one, in the creation's response.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, status

from app.api.contract import links, problems
from app.api.fields import Timestamp
from app.api.security import Authenticated
from app.api.webhookschemas import (
    DeliveryStatus,
    WebhookDeliveryList,
    WebhookDeliveryPublic,
    WebhookEndpointCreate,
    WebhookEndpointCreated,
    WebhookEndpointList,
    WebhookEndpointPublic,
    WebhookSecretRotate,
    WebhookSecretRotated,
    WebhookTestAccepted,
)
from app.errors import Forbidden
from app.webhooks.endpoints import Endpoint
from app.webhooks.service import Webhooks

ADMIN_ONLY = "Host or Origin not allowed, or the key is not an admin key"
NO_ENDPOINT = "No such webhook endpoint"
OFF = "Webhooks are off on this gateway (`webhooks.enabled = false`)"
STORAGE = "The database cannot be used now (see Retry-After)"

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])


def _webhooks(request: Request, principal: Authenticated) -> Webhooks:
    if not principal.admin:
        raise Forbidden(
            "webhooks may carry every key's events: manage them with an admin key "
            "(server.token, or an api_keys entry with admin = true)"
        )
    webhooks: Webhooks = request.app.state.webhooks
    return webhooks


Admin = Annotated[Webhooks, Depends(_webhooks)]


def _public(endpoint: Endpoint) -> WebhookEndpointPublic:
    return WebhookEndpointPublic(
        id=endpoint.id,
        url=endpoint.url,
        events=sorted(endpoint.events),
        keys=sorted(endpoint.keys) if endpoint.keys is not None else None,
        description=endpoint.description,
        enabled=endpoint.enabled,
        disabled_reason=endpoint.disabled_reason,
        source=endpoint.source,
        created_at=endpoint.created_at,
    )


@router.get(
    "",
    operation_id="listWebhooks",
    responses=problems(notes={403: ADMIN_ONLY, 409: OFF, 503: STORAGE}),
)
async def list_webhooks(webhooks: Admin) -> WebhookEndpointList:
    """Every endpoint: those of the configuration, then those added here."""
    return WebhookEndpointList(endpoints=[_public(e) for e in await webhooks.list_endpoints()])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    operation_id="createWebhook",
    responses={
        201: links(
            "getWebhook",
            "disableWebhook",
            "enableWebhook",
            "testWebhook",
            "rotateWebhookSecret",
            "listWebhookDeliveries",
            webhook_id="id",
        ),
        **problems(
            notes={
                403: ADMIN_ONLY,
                409: OFF,
                422: "Invalid request: a URL that is not `https` (nor `http` to a host of "
                "`webhooks.allow_http_hosts`), on a host outside `webhooks.allowed_hosts`, "
                "with user info or a fragment; a secret that is not `whsec_` and the base64 "
                "of 24 to 64 bytes; `keys` naming no key of this gateway",
                503: STORAGE,
            }
        ),
    },
)
async def create_webhook(body: WebhookEndpointCreate, webhooks: Admin) -> WebhookEndpointCreated:
    """Add an endpoint for the event types it names (and, with ``keys``, only those keys'
    sessions). Without ``secret`` the gateway makes one and returns it here, once."""
    endpoint, secret = await webhooks.add(
        url=body.url,
        events=list(body.events),
        keys=body.keys,
        description=body.description,
        secret=body.secret,
    )
    return WebhookEndpointCreated(**_public(endpoint).model_dump(), secret=secret)


READ = problems(notes={403: ADMIN_ONLY, 404: NO_ENDPOINT, 409: OFF, 503: STORAGE})
CHANGE = problems(
    notes={
        403: ADMIN_ONLY,
        404: NO_ENDPOINT,
        409: "The endpoint comes from the configuration (change it there), or webhooks are off",
        503: STORAGE,
    }
)


@router.get("/{webhook_id}", operation_id="getWebhook", responses=READ)
async def get_webhook(webhook_id: str, webhooks: Admin) -> WebhookEndpointPublic:
    return _public(await webhooks.get(webhook_id))


@router.post("/{webhook_id}/disable", operation_id="disableWebhook", responses=CHANGE)
async def disable_webhook(webhook_id: str, webhooks: Admin) -> WebhookEndpointPublic:
    """Stop sending to the endpoint; its pending deliveries are cancelled."""
    return _public(await webhooks.set_enabled(webhook_id, enabled=False))


@router.post("/{webhook_id}/enable", operation_id="enableWebhook", responses=CHANGE)
async def enable_webhook(webhook_id: str, webhooks: Admin) -> WebhookEndpointPublic:
    """Send to the endpoint again (events stored from now on)."""
    return _public(await webhooks.set_enabled(webhook_id, enabled=True))


@router.post(
    "/{webhook_id}/secret",
    operation_id="rotateWebhookSecret",
    responses=problems(
        notes={
            403: ADMIN_ONLY,
            404: NO_ENDPOINT,
            409: "The endpoint comes from the configuration (rotate it there: `secret`, "
            "`previous_secrets`), or webhooks are off",
            422: "Invalid request: a secret that is not `whsec_` and the base64 of 24 to 64 bytes",
            503: STORAGE,
        }
    ),
)
async def rotate_webhook_secret(
    webhook_id: str, body: WebhookSecretRotate, webhooks: Admin
) -> WebhookSecretRotated:
    """Sign with a new secret from now on, and (``keep_previous``) with the old ones too
    until the receiver has the new one: a rotation without a refused delivery."""
    endpoint, secret = await webhooks.rotate(
        webhook_id, secret=body.secret, keep_previous=body.keep_previous
    )
    return WebhookSecretRotated(
        id=endpoint.id, secret=secret, signing_secrets=len(endpoint.secrets)
    )


@router.post(
    "/{webhook_id}/test",
    status_code=status.HTTP_202_ACCEPTED,
    operation_id="testWebhook",
    responses=problems(
        notes={
            403: ADMIN_ONLY,
            404: NO_ENDPOINT,
            409: "The endpoint is disabled, or webhooks are off",
            503: STORAGE,
        }
    ),
)
async def test_webhook(webhook_id: str, webhooks: Admin) -> WebhookTestAccepted:
    """Send the endpoint a signed ``webhook.test`` message (through the outbox, like any other:
    its delivery shows in the endpoint's log)."""
    return WebhookTestAccepted(message_id=await webhooks.test(webhook_id))


@router.get("/{webhook_id}/deliveries", operation_id="listWebhookDeliveries", responses=READ)
async def list_webhook_deliveries(
    webhook_id: str,
    webhooks: Admin,
    status_: Annotated[DeliveryStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[
        Timestamp | None, Query(description="Only deliveries made before this time")
    ] = None,
) -> WebhookDeliveryList:
    """The endpoint's deliveries, newest first: status, attempts, the last answer or error
    (never a secret); page with ``before`` = the last ``created_at`` you got."""
    records = await webhooks.deliveries(webhook_id, status=status_, limit=limit, before=before)
    return WebhookDeliveryList(
        deliveries=[
            WebhookDeliveryPublic(
                id=r.id,
                message_id=r.message_id,
                endpoint_id=r.endpoint_id,
                type=r.type,
                session_id=r.session_id,
                status=r.status,
                attempts=r.attempts,
                next_attempt_in_s=r.next_attempt_in_s,
                last_status_code=r.last_status_code,
                last_error=r.last_error,
                sent_by=r.sent_by,
                created_at=r.created_at,
                updated_at=r.updated_at,
                finished_at=r.finished_at,
            )
            for r in records
        ]
    )
