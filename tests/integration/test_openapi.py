"""The OpenAPI document publishes the operations and the typed event union."""

from __future__ import annotations

from tests.integration.conftest import FakeGateway


def test_openapi_names_every_operation_and_types_the_event_union(fake_gateway: FakeGateway) -> None:
    with fake_gateway.client() as client:
        document = client.get("/openapi.json").json()
    operations = {op["operationId"] for path in document["paths"].values() for op in path.values()}
    assert {
        "createSession",
        "listSessions",
        "getSession",
        "deleteSession",
        "createTurn",
        "getTurn",
        "listTurns",
        "getEvents",
        "respondApproval",
        "listApprovals",
        "interruptTurn",
    } <= operations
    schemas = document["components"]["schemas"]
    events = schemas["EventPage"]["properties"]["events"]["items"]
    mapping = events["discriminator"]["mapping"]
    assert {"message.delta", "turn.completed", "approval.requested", "retry.scheduled"} <= set(
        mapping
    )
    assert len(events["oneOf"]) == len(mapping) == 21
    delta = schemas["MessageDelta"]["properties"]
    assert set(delta) == {"message_id", "text"}
    create = schemas["SessionCreate"]
    assert create["required"] == ["workspace"]
    assert create["additionalProperties"] is False
