"""The JSON log format: ids from context, fields, redaction of everything a line carries."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from app.observability.logs import LogFormat, bind_ids, chosen_format, configure_logging
from app.redaction import Redactor, install_log_redaction

SECRET = "gateway-token-0123456789abcdefghijklmnop"


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    redactor = Redactor([SECRET])
    uninstall = install_log_redaction(redactor)
    configure_logging(level="debug", log_format="json", redactor=redactor)
    yield stream
    uninstall()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_carries_the_ids_bound_in_its_context_and_its_fields(
    captured: io.StringIO,
) -> None:
    log = logging.getLogger("app.test")
    log.info("outside")
    with bind_ids(session_id="ses_1", turn_id="trn_1", provider="codex"):
        log.info("inside %s", "x", extra={"event": "turn.started", "attempt": 2})
        with bind_ids(turn_id=None, provider="opencode"):
            log.warning("nested")
    outside, inside, nested = lines(captured)
    assert "session_id" not in outside
    assert inside["msg"] == "inside x"
    assert inside["level"] == "info"
    assert inside["logger"] == "app.test"
    assert (inside["session_id"], inside["turn_id"], inside["provider"]) == (
        "ses_1",
        "trn_1",
        "codex",
    )
    assert (inside["event"], inside["attempt"]) == ("turn.started", 2)
    assert (nested["turn_id"], nested["provider"]) == ("trn_1", "opencode")


def test_explicit_ids_win_over_the_context(captured: io.StringIO) -> None:
    with bind_ids(session_id="ses_ctx"):
        logging.getLogger("app.test").info("x", extra={"session_id": "ses_explicit"})
    assert lines(captured)[0]["session_id"] == "ses_explicit"


def test_tasks_inherit_the_ids_of_the_context_that_created_them(captured: io.StringIO) -> None:
    async def main() -> None:
        async def child() -> None:
            logging.getLogger("app.test").info("from the task")

        with bind_ids(session_id="ses_task"):
            task = asyncio.create_task(child())
        await task

    asyncio.run(main())
    assert lines(captured)[-1]["session_id"] == "ses_task"


def test_message_arguments_fields_and_exceptions_are_redacted(captured: io.StringIO) -> None:
    log = logging.getLogger("app.test")
    log.info("token %s", SECRET, extra={"detail": f"key {SECRET}", "nested": {"a": [SECRET]}})
    log.info("header", extra={"headers": "Authorization: Bearer abc.def"})
    try:
        raise RuntimeError(f"failed with sk-ant-api03-{'x' * 30}")
    except RuntimeError:
        log.exception("boom")
    text = captured.getvalue()
    assert SECRET not in text
    assert "abc.def" not in text
    assert "sk-ant-api03" not in text
    first, second, third = lines(captured)
    assert first["msg"] == "token [redacted]"
    assert first["detail"] == "key [redacted]"
    assert first["nested"] == {"a": ["[redacted]"]}
    assert "[redacted]" in second["headers"]
    assert "RuntimeError" in third["exc"]
    assert len(text.splitlines()) == 3  # the traceback stays inside its line


def test_text_format_appends_the_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging(level="info", log_format="text")
        with bind_ids(session_id="ses_9"):
            logging.getLogger("app.test").info("hello")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert stream.getvalue().rstrip().endswith("app.test: hello [session_id=ses_9]")


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "setting", "chosen"),
    [
        (io.StringIO(), "auto", "json"),
        (_Terminal(), "auto", "text"),
        (_Terminal(), "json", "json"),
        (io.StringIO(), "text", "text"),
    ],
)
def test_auto_is_text_on_a_terminal_and_json_otherwise(
    monkeypatch: pytest.MonkeyPatch, stream: io.StringIO, setting: LogFormat, chosen: str
) -> None:
    assert chosen_format(setting, stream) == chosen
    monkeypatch.setattr("sys.stderr", stream)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging(level="info", log_format=setting)
        logging.getLogger("app.test").info("hello")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    line = stream.getvalue().rstrip()
    assert line.startswith("{") is (chosen == "json")


def test_json_lines_carry_no_terminal_escape_codes(captured: io.StringIO) -> None:
    log = logging.getLogger("uvicorn.error")
    colour = "Started server process [\x1b[36m%d\x1b[0m]"
    log.info("Started server process [%d]", 42, extra={"color_message": colour})
    log.info(
        "\x1b[1mbold\x1b[0m and \x1b]8;;http://x\x07a link\x1b]8;;\x07", extra={"f": "\x1b[2K"}
    )
    text = captured.getvalue()
    assert "\x1b" not in text
    assert "\\u001b" not in text
    first, second = lines(captured)
    assert "color_message" not in first
    assert first["msg"] == "Started server process [42]"
    assert (second["msg"], second["f"]) == ("bold and a link", "")


def test_alembic_and_httpx_say_only_warnings_even_at_debug(captured: io.StringIO) -> None:
    logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
    logging.getLogger("httpx").info("HTTP Request: GET http://127.0.0.1:1/ 200")
    logging.getLogger("alembic.runtime.migration").warning("something to fix")
    logging.getLogger("app.test").debug("ours")
    assert [line["msg"] for line in lines(captured)] == ["something to fix", "ours"]
