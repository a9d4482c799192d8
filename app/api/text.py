"""Text a client sends must be Unicode that UTF-8 can carry, checked once at the edge.

JSON may spell a lone UTF-16 surrogate (``"\\ud800"``); Python's decoder accepts it, but no
UTF-8 encoder does, so such a string would be refused half-way through a request (by the
store, the event log or the response) after parts of it had been kept or run. Every request
body and WebSocket frame is validated as a model deriving from ``app.api.schemas._In``, whose
validator calls ``check_text`` on the whole document before any field is read: a bad string
anywhere, as a value or as an object key, is a 422 naming its place. Query and path
parameters cannot hold one: the server decodes them from UTF-8, replacing what is invalid.
"""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Location = tuple[str | int, ...]

MESSAGE = (
    "must be valid Unicode text: it holds a lone surrogate (a \\ud800-\\udfff escape "
    "without its pair), which UTF-8 cannot carry; send the character itself or a whole pair"
)


def _encodes(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """``text`` with what UTF-8 cannot carry spelled as ``\\udXXX`` escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def invalid_text_at(document: object) -> Location | None:
    """Where the first string (value or object key) of a decoded JSON document that is not
    valid Unicode is, or None when all of them are."""
    stack: list[tuple[Location, object]] = [((), document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if not _encodes(value):
                return where
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and not _encodes(key):
                    return (*where, printable(key))
                stack.append(((*where, key), item))
        elif isinstance(value, list | tuple):
            stack.extend(((*where, index), item) for index, item in enumerate(value))
    return None


def check_text(title: str, document: object) -> None:
    """Raise a ``ValidationError`` located at the first string of ``document`` that is not
    valid Unicode (type ``unicode_text``)."""
    where = invalid_text_at(document)
    if where is None:
        return
    error = InitErrorDetails(
        type=PydanticCustomError("unicode_text", MESSAGE), loc=where, input=None
    )
    raise ValidationError.from_exception_data(title, [error])
