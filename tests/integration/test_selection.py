"""Provider selection through the API: reasons, required capabilities, 503 with candidates."""

from __future__ import annotations

from tests.fakes.gateway import FakeGateway


def test_selection_honours_requires_and_lists_why_nothing_can_serve(
    fake_gateway: FakeGateway,
) -> None:
    workspace = str(fake_gateway.workspace)
    with fake_gateway.client() as client:
        created = client.post(
            "/v1/sessions", json={"workspace": workspace, "requires": ["approvals", "resume"]}
        )
        assert created.status_code == 201, created.text
        assert created.json()["provider"] == "claude_code"
        assert created.json()["selection"] == {"reason": "default", "skipped": []}

        unknown = client.post("/v1/sessions", json={"workspace": workspace, "requires": ["x"]})
        assert unknown.status_code == 422
        assert unknown.json()["errors"][0]["location"] == "body.requires.0"
        assert "shared_process" in unknown.json()["errors"][0]["message"]  # the valid names

        # Claude Code is the only candidate and has no shared process: waiting will not help.
        unmet = client.post(
            "/v1/sessions", json={"workspace": workspace, "requires": ["shared_process"]}
        )
        assert unmet.status_code == 422, unmet.text
        assert unmet.json()["type"].endswith(":capabilities_unmet")
        (candidate,) = unmet.json()["candidates"]
        assert candidate == {
            "provider": "claude_code",
            "reason": "lacks required capabilities: shared_process",
        }

        refused = client.post("/v1/sessions", json={"workspace": workspace, "provider": "codex"})
        assert refused.status_code == 503
        assert refused.headers["content-type"].startswith("application/problem+json")
        (candidate,) = refused.json()["candidates"]
        assert candidate["provider"] == "codex"
        assert candidate["reason"].startswith("disabled")
