"""``GET /metrics``: the Prometheus exposition of ``app.observability.metrics``.

Behind an admin key by default (the numbers describe every key's sessions); with
``server.metrics_public`` it answers without one, for a scraper on a trusted network.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.api.schemas import Problem
from app.api.security import Authenticated
from app.errors import Forbidden
from app.observability.metrics import CONTENT_TYPE, GatewayMetrics

RESPONSES: dict[int | str, dict[str, object]] = {
    200: {
        "description": "Prometheus text exposition format",
        "content": {CONTENT_TYPE: {"schema": {"type": "string"}}},
    },
}


async def _render(request: Request) -> Response:
    state = request.app.state
    metrics: GatewayMetrics = state.metrics
    metrics.set_states(
        sessions=await state.store.session_status_counts(),
        processes=[child.label for child in state.runner.live if child.returncode is None],
        subscribers=state.manager.events.subscribers_by_transport(),
    )
    return Response(metrics.render(), media_type=CONTENT_TYPE)


def build_router(*, public: bool) -> APIRouter:
    router = APIRouter(tags=["health"])
    if public:

        @router.get("/metrics", operation_id="getMetrics", responses=RESPONSES)
        async def public_metrics(request: Request) -> Response:
            return await _render(request)

    else:

        @router.get(
            "/metrics",
            operation_id="getMetrics",
            responses={**RESPONSES, 401: {"model": Problem}, 403: {"model": Problem}},
        )
        async def metrics(request: Request, principal: Authenticated) -> Response:
            if not principal.admin:
                raise Forbidden(
                    "metrics describe every key's sessions: scrape with an admin key "
                    "(server.token, or an api_keys entry with admin = true)"
                )
            return await _render(request)

    return router
