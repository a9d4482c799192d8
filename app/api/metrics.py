"""``GET /metrics``: the Prometheus exposition of ``app.observability.metrics``.

Behind an admin key by default (the numbers describe every key's sessions); with
``server.metrics_public`` it answers without one, for a scraper on a trusted network.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.api.contract import problems
from app.api.security import Authenticated
from app.errors import Forbidden
from app.observability.metrics import CONTENT_TYPE, GatewayMetrics
from app.runtime import reads

RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"description": "Prometheus text exposition format"},
}


class MetricsResponse(Response):
    """The exposition, so the document says ``text/plain; version=…`` and nothing else."""

    media_type = CONTENT_TYPE


async def _render(request: Request) -> Response:
    state = request.app.state
    metrics: GatewayMetrics = state.metrics
    metrics.set_states(
        sessions=await reads.session_status_counts(state.manager),
        processes=[child.label for child in state.runner.live if child.returncode is None],
        subscribers=state.manager.events.subscribers_by_transport(),
    )
    metrics.set_figures(state.manager.figures.all(state.registry.names))
    return MetricsResponse(metrics.render())


def build_router(*, public: bool) -> APIRouter:
    router = APIRouter(tags=["health"])
    if public:

        @router.get(
            "/metrics",
            operation_id="getMetrics",
            response_class=MetricsResponse,
            responses=RESPONSES,
        )
        async def public_metrics(request: Request) -> Response:
            return await _render(request)

    else:

        @router.get(
            "/metrics",
            operation_id="getMetrics",
            response_class=MetricsResponse,
            responses={
                **RESPONSES,
                **problems(
                    notes={403: "Host or Origin not allowed, or the key is not an admin key"}
                ),
            },
        )
        async def metrics(request: Request, principal: Authenticated) -> Response:
            if not principal.admin:
                raise Forbidden(
                    "metrics describe every key's sessions: scrape with an admin key "
                    "(server.token, or an api_keys entry with admin = true)"
                )
            return await _render(request)

    return router
