"""Secrets never reach the log: every record is redacted when it is created.

``install_log_redaction`` wraps the logging record factory, so records of every logger
(the gateway's, uvicorn's access and error logs, libraries') are cleaned before any handler
or formatter sees them, including handlers configured later (uvicorn configures its own when
it starts). Removed, whole value: the gateway's keys and secret-looking provider variables
by value, ``Authorization`` header values, ``access_token=`` / ``token=`` query values,
``Bearer …`` and known API-key shapes (``sk-ant-…``, ``sk-…``). Exception text is
formatted and redacted too. Request bodies are never logged.
"""

from __future__ import annotations

import json
import logging
import re
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from app.settings import Settings

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8
"""Shorter configured values are not redacted by value (they would blank common words)."""

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
"""Provider ``env`` variables whose values are treated as secrets."""

_PATTERNS = [
    (re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\"'\r\n,}]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 " + REDACTED),
    (re.compile(r"(?i)\b((?:access_)?token=)[^&\s\"']+"), r"\1" + REDACTED),
    (re.compile(r"\bsk-ant-[A-Za-z0-9_-]+"), REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
]


class Redactor:
    """Removes known secret values and secret-shaped substrings from text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
        self._values = re.compile("|".join(map(re.escape, values))) if values else None

    def __call__(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub(REDACTED, text)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    def value(self, value: Any) -> Any:
        """A log argument, redacted; non-text values keep their type unless they hold a secret."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, int | float | bool) or value is None:
            return value
        shown = str(value)
        cleaned = self(shown)
        return value if cleaned == shown else cleaned

    def record(self, record: logging.LogRecord) -> None:
        """Redact a record in place: message, arguments and exception text."""
        if isinstance(record.msg, str):
            record.msg = self(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self.value(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: self.value(v) for k, v in record.args.items()}
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = self(record.exc_text)
        if record.stack_info:
            record.stack_info = self(record.stack_info)


class SecretMask:
    """Replaces configured secret values with ``[redacted]`` in what the gateway stores and
    sends: event payloads (already JSON) and turn texts.

    By value only, and only values of at least ``MIN_SECRET_LENGTH`` characters with a letter
    in them (a number could be part of another number in a JSON document).
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {s for s in secrets if len(s) >= MIN_SECRET_LENGTH and _has_letter(s)}
        self._text = sorted(values, key=len, reverse=True)
        # As each value appears inside a JSON string, with and without \u escapes.
        forms = {json.dumps(v, ensure_ascii=a)[1:-1] for v in values for a in (False, True)}
        self._json = sorted(forms, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._text)

    def text(self, value: str) -> str:
        for secret in self._text:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def json(self, encoded: str) -> str:
        """``encoded`` (a JSON document) with each secret inside its strings replaced."""
        for form in self._json:
            if form in encoded:
                encoded = encoded.replace(form, REDACTED)
        return encoded

    def values(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings) with its strings masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.values(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.values(v) for v in value]
        return value


def _has_letter(value: str) -> bool:
    return any(c.isalpha() for c in value)


def secrets_of(
    settings: Settings, admin_token: str, *, cli_secrets: Iterable[str] = ()
) -> list[str]:
    """Every value the log and the events must not show: the keys, secret-looking provider
    variables, and ``cli_secrets`` (the credentials the CLIs get from the gateway's
    environment)."""
    values = [admin_token, *(k.token.get_secret_value() for k in settings.server.api_keys)]
    for provider in settings.providers.values():
        values.extend(v for name, v in provider.env.items() if SECRET_NAME.search(name))
    values.extend(cli_secrets)
    values.extend(settings.cluster.secrets())
    return values


def install_log_redaction(redactor: Redactor) -> Callable[[], None]:
    """Redact every log record from now on; returns a function that undoes it."""
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        redactor.record(record)
        return record

    logging.setLogRecordFactory(factory)

    def uninstall() -> None:
        logging.setLogRecordFactory(previous)

    return uninstall
