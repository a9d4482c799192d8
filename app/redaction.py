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

import logging
import re
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from app.masking import MIN_SECRET_LENGTH, REDACTED, SecretMask
from app.settings import Settings

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SECRET_NAME",
    "Redactor",
    "SecretMask",
    "install_log_redaction",
    "secrets_of",
]

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
    """Removes known secrets (in every form ``SecretMask`` knows) and secret-shaped
    substrings from text.

    Given a ``SecretMask``, it shares it: a secret added to the mask later (a rotated token)
    is removed from the log from then on as well.
    """

    def __init__(self, secrets: Iterable[str] | SecretMask) -> None:
        self.mask = secrets if isinstance(secrets, SecretMask) else SecretMask(secrets)

    def __call__(self, text: str) -> str:
        text = self.mask.text(text)
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


def secrets_of(
    settings: Settings, admin_token: str, *, cli_secrets: Iterable[str] = ()
) -> list[str]:
    """Every value the log and the events must not show: the keys, secret-looking provider
    variables, ``cli_secrets`` (the credentials the CLIs get from the gateway's
    environment), the cluster's and the configured webhook endpoints' secrets."""
    values = [admin_token, *(k.token.get_secret_value() for k in settings.server.api_keys)]
    for provider in settings.providers.values():
        values.extend(v for name, v in provider.env.items() if SECRET_NAME.search(name))
    values.extend(cli_secrets)
    values.extend(settings.cluster.secrets())
    values.extend(settings.telemetry.secrets())
    values.extend(settings.webhooks.secrets())
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
