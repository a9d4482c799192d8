"""The few ``opencode serve`` HTTP routes the gateway uses (the classic routes of 1.18.33).

Every route that acts on a thread names its workspace with ``?directory=<abs path>``: the
server keeps one instance per directory, and a thread's tools run in the directory it was
created for. Failures surface as ``ApiError`` — with the HTTP status when the server answered,
without one when it did not (refused, reset, timed out).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from pydantic import JsonValue

__all__ = ["ApiError", "OpenCodeApi"]


class ApiError(Exception):
    """A request failed; ``status`` is ``None`` when no HTTP answer came back."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class OpenCodeApi:
    """Typed calls over one authenticated client of one server process."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def health(self, *, timeout_s: float | None = None) -> None:
        """Raise ``ApiError`` unless ``GET /global/health`` says ``healthy`` (in time)."""
        body = await self._call("GET", "/global/health", timeout_s=timeout_s)
        if not isinstance(body, dict) or body.get("healthy") is not True:
            raise ApiError(f"the server does not report itself healthy: {body!r}")

    async def create_session(
        self, *, directory: Path, title: str, permission: list[dict[str, JsonValue]]
    ) -> str:
        """Create a thread bound to ``directory``; return its ``ses_…`` id.

        A title is always given: without one OpenCode spends a model request on inventing it.
        """
        body = await self._call(
            "POST", "/session", directory, json={"title": title, "permission": permission}
        )
        thread_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(thread_id, str) or not thread_id:
            raise ApiError(f"POST /session answered without a session id: {body!r}")
        return thread_id

    async def prompt(
        self, thread_id: str, *, directory: Path, text: str, model: dict[str, str] | None
    ) -> None:
        """Start a turn (``prompt_async``, 204); its progress arrives on the event stream."""
        body: dict[str, Any] = {"parts": [{"type": "text", "text": text}]}
        if model is not None:
            body["model"] = model
        await self._call("POST", f"/session/{thread_id}/prompt_async", directory, json=body)

    async def abort(self, thread_id: str, *, directory: Path) -> None:
        """Ask the thread's running turn to stop; it ends with ``session.idle``."""
        await self._call("POST", f"/session/{thread_id}/abort", directory)

    async def reply_permission(
        self, request_id: str, *, directory: Path, reply: dict[str, JsonValue]
    ) -> None:
        """Answer a ``permission.asked`` request (404 once it was answered or withdrawn)."""
        await self._call("POST", f"/permission/{request_id}/reply", directory, json=reply)

    async def reply_question(
        self, request_id: str, *, directory: Path, reply: dict[str, JsonValue]
    ) -> None:
        """Answer a ``question.asked`` request (404 once it was answered or withdrawn)."""
        await self._call("POST", f"/question/{request_id}/reply", directory, json=reply)

    async def busy_threads(self, *, directory: Path) -> set[str]:
        """The threads of ``directory`` that are working now (idle ones are not listed)."""
        body = await self._call("GET", "/session/status", directory)
        return set(body) if isinstance(body, dict) else set()

    async def last_message(self, thread_id: str, *, directory: Path) -> dict[str, Any] | None:
        """The thread's newest ``{info, parts}`` message, if any."""
        body = await self._call(
            "GET", f"/session/{thread_id}/message", directory, params={"limit": 1}
        )
        if isinstance(body, list) and body and isinstance(body[-1], dict):
            return body[-1]
        return None

    async def messages(self, thread_id: str, *, directory: Path) -> list[dict[str, Any]]:
        """Every ``{info, parts}`` message of the thread, oldest first."""
        body = await self._call("GET", f"/session/{thread_id}/message", directory)
        if not isinstance(body, list):
            raise ApiError(f"GET /session/{thread_id}/message answered {type(body).__name__}")
        return [m for m in body if isinstance(m, dict)]

    async def fork(self, thread_id: str, *, before: str | None) -> tuple[str, str | None]:
        """A new thread holding the thread's messages up to, not including, message
        ``before`` (None: all of them), in the thread's own directory (1.18.33 runs every
        ``/session/{id}/…`` request there, whatever ``?directory=`` says): its ``ses_…`` id
        and that directory."""
        payload: dict[str, Any] = {} if before is None else {"messageID": before}
        body = await self._call("POST", f"/session/{thread_id}/fork", json=payload)
        forked = body.get("id") if isinstance(body, dict) else None
        if not isinstance(forked, str) or not forked:
            raise ApiError(f"POST /session/{thread_id}/fork answered without an id: {body!r}")
        directory = body.get("directory")
        return forked, directory if isinstance(directory, str) else None

    async def update_session(
        self,
        thread_id: str,
        *,
        directory: Path,
        title: str,
        permission: list[dict[str, JsonValue]],
    ) -> None:
        """Set a thread's title and permission ruleset."""
        body = {"title": title, "permission": permission}
        await self._call("PATCH", f"/session/{thread_id}", directory, json=body)

    async def _call(
        self,
        method: str,
        path: str,
        directory: Path | None = None,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        query = dict(params or {})
        if directory is not None:
            query["directory"] = str(directory)
        # The client's own timeout applies unless the caller bounds this request tighter.
        timeout = timeout_s if timeout_s is not None else httpx.USE_CLIENT_DEFAULT
        try:
            response = await self.client.request(
                method, path, params=query, json=json, timeout=timeout
            )
        except httpx.HTTPError as exc:
            raise ApiError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise ApiError(
                f"{method} {path}: HTTP {response.status_code}: {response.text[:500]}",
                status=response.status_code,
            )
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(f"{method} {path}: the answer is not JSON") from exc
