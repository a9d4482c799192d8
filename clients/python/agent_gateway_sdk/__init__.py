"""Agent Gateway's Python SDK: sessions, turns, approvals, questions and live events of a
gateway, blocking (``Client``) or asyncio (``AsyncClient``).

    from agent_gateway_sdk import Client

    with Client("http://127.0.0.1:8765", token="…") as client:
        session = client.sessions.create(workspace="/home/me/project")
        outcome = session.run("Add a test for the parser", on_approval=lambda a: "allow")
        print(outcome.final_text)
"""

from agent_gateway_sdk._async_stream import AsyncEventStream
from agent_gateway_sdk._outcomes import ApprovalAnswer, TurnOutcome
from agent_gateway_sdk._sync_stream import EventStream
from agent_gateway_sdk._version import API_VERSION, __version__
from agent_gateway_sdk.aio import AsyncClient, AsyncSession
from agent_gateway_sdk.client import Client, Session
from agent_gateway_sdk.controls import (
    ControlFrame,
    Degraded,
    Evicted,
    Recovered,
    ResyncRequired,
    Shutdown,
)
from agent_gateway_sdk.errors import (
    AgentGatewayError,
    ApiError,
    AuthenticationError,
    ConflictError,
    ConnectionFailed,
    EventsSkipped,
    GoneError,
    NotFoundError,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    UnexpectedResponse,
    UnprocessableEntity,
)
from agent_gateway_sdk.events import Event, EventPage, UnknownEvent, parse_event
from agent_gateway_sdk.models import (
    Answer,
    Approval,
    Changes,
    Provider,
    QuestionRequest,
    RetryPolicy,
    Revert,
    RunResult,
    SessionInfo,
    Turn,
    UsageReport,
)

__all__ = [
    "API_VERSION",
    "AgentGatewayError",
    "Answer",
    "ApiError",
    "Approval",
    "ApprovalAnswer",
    "AsyncClient",
    "AsyncEventStream",
    "AsyncSession",
    "AuthenticationError",
    "Changes",
    "Client",
    "ConflictError",
    "ConnectionFailed",
    "ControlFrame",
    "Degraded",
    "Event",
    "EventPage",
    "EventStream",
    "EventsSkipped",
    "Evicted",
    "GoneError",
    "NotFoundError",
    "PayloadTooLarge",
    "PermissionDenied",
    "Provider",
    "QuestionRequest",
    "RateLimited",
    "Recovered",
    "ResyncRequired",
    "RetryPolicy",
    "Revert",
    "RunResult",
    "ServerError",
    "ServiceUnavailable",
    "Session",
    "SessionInfo",
    "Shutdown",
    "Turn",
    "TurnOutcome",
    "UnexpectedResponse",
    "UnknownEvent",
    "UnprocessableEntity",
    "UsageReport",
    "__version__",
    "parse_event",
]
