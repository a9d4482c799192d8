"""Requests as the stub received them, and how it answered each."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.stub_llm.plans import is_side_request, last_user_text, user_texts

# Served by tests/stub_openai.py: Responses API (Codex) and Chat Completions (OpenCode).
OPENAI_PATHS = frozenset({"/v1/responses", "/v1/chat/completions"})


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the stub received it."""

    method: str
    target: str  # path with query string, as sent: "/v1/messages?beta=true"
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    raw_body: bytes
    body: Any  # parsed JSON, or None when the body was empty or not JSON
    received_at: float = field(default_factory=time.monotonic)

    @property
    def path(self) -> str:
        """The path without its query string: ``/v1/messages``."""
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query)

    @property
    def is_message(self) -> bool:
        return self.method == "POST" and self.path == "/v1/messages"

    @property
    def is_openai(self) -> bool:
        """``POST /v1/responses`` or ``POST /v1/chat/completions``."""
        return self.method == "POST" and self.path in OPENAI_PATHS

    @property
    def is_gemini(self) -> bool:
        """A Gemini API request (``…/models/{model}:generateContent`` and the like)."""
        from tests.stub_gemini import is_gemini  # noqa: PLC0415 (import cycle)

        return is_gemini(self)

    @property
    def is_side(self) -> bool:
        """An auxiliary model call (title, summary...) of any of the four formats."""
        if self.is_gemini:
            from tests.stub_gemini import is_json_request  # noqa: PLC0415 (import cycle)

            return is_json_request(self.body)
        if self.is_openai:
            from tests.stub_openai import is_openai_side_request  # noqa: PLC0415 (import cycle)

            return is_openai_side_request(self.body)
        return self.is_message and is_side_request(self.body)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` array of a Messages API body (empty for anything else)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return [m for m in self.body["messages"] if isinstance(m, dict)]
        return []

    @property
    def conversation_text(self) -> str:
        """Every user message's text, joined by newlines: where fault directives are searched."""
        if self.is_gemini:
            from tests.stub_gemini import gemini_user_texts  # noqa: PLC0415 (import cycle)

            return "\n".join(gemini_user_texts(self.body))
        if self.is_openai:
            from tests.stub_openai import openai_user_texts  # noqa: PLC0415 (import cycle)

            return "\n".join(openai_user_texts(self))
        return "\n".join(user_texts(self.body))

    @property
    def last_user_text(self) -> str:
        """The prompt text the answer was chosen from (any of the four formats)."""
        if self.is_gemini:
            from tests.stub_gemini import gemini_input  # noqa: PLC0415 (import cycle)

            return gemini_input(self.body)[0]
        if self.is_openai:
            from tests.stub_openai import openai_last_user_text  # noqa: PLC0415 (import cycle)

            return openai_last_user_text(self)
        return last_user_text(self.body)


@dataclass(frozen=True)
class RecordedResponse:
    """How the stub answered ``request`` (``completed`` is False if the client left mid-way)."""

    request: RecordedRequest
    status: int
    completed: bool
    finished_at: float = field(default_factory=time.monotonic)
    cut: bool = False  # the stub dropped the connection on purpose ([[cut]])
