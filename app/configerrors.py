"""What a configuration error says: each bad setting by its dotted name, where it was set (the
TOML file and line, or the ``GATEWAY_*`` variable), what was expected, and for a name that is
no setting, the names that are.

    /etc/gateway.toml:4: server.prot: no such setting; did you mean server.port
      (GATEWAY_SERVER__PORT)?
    GATEWAY_SERVER__PORT: server.port: should be less than or equal to 65535

``tomllib`` keeps no positions, so ``key_lines`` finds each key's line by reading the file's
text: table headers, arrays of tables and (dotted) keys, skipping multi-line strings and
values.
"""

from __future__ import annotations

import difflib
import json
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

ENV_PREFIX = "GATEWAY_"
ENV_DELIMITER = "__"

Location = tuple[str | int, ...]


def describe(
    exc: ValidationError,
    *,
    model: type[BaseModel],
    path: Path | None,
    text: str | None,
    environ: Mapping[str, str],
) -> str:
    """The message of a ``ConfigError`` for ``exc``: one line per error.

    ``text`` is the configuration file's content (None: no file); ``environ`` the variables
    the settings were read from (a variable overrides the file, so it is named first).
    """
    lines = key_lines(text) if text is not None else {}
    variables = {name.upper() for name in environ}
    where = f" in {path}" if path else ""
    said = [f"invalid configuration{where}:"]
    for error in exc.errors():
        loc: Location = tuple(error["loc"])
        said.append("  " + _one(error, loc, model, path, lines, variables))
    return "\n".join(said)


def env_name(loc: Sequence[str | int]) -> str:
    """The variable that sets the setting at ``loc`` (a list is set whole, as JSON)."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            break
        parts.append(part.upper())
    return ENV_PREFIX + ENV_DELIMITER.join(parts)


def dotted(loc: Sequence[str | int]) -> str:
    """``server.api_keys[0].token``; a key that is no bare TOML key is quoted."""
    shown = ""
    for part in loc:
        if isinstance(part, int):
            shown += f"[{part}]"
        elif part.replace("_", "").replace("-", "").isalnum():
            shown += f".{part}" if shown else part
        else:
            shown += f".{json.dumps(part)}" if shown else json.dumps(part)
    return shown or "(top level)"


def _one(
    error: ErrorDetails,
    loc: Location,
    model: type[BaseModel],
    path: Path | None,
    lines: Mapping[Location, int],
    variables: set[str],
) -> str:
    name = dotted(loc)
    variable = env_name(loc) if loc else None
    from_env = variable is not None and variable in variables
    line = None if from_env or not loc else _line_of(loc, lines)
    if from_env:
        where = f"{variable}: "
    elif path is not None and line is not None:
        where = f"{path}:{line}: "
    else:
        where = ""
    if error["type"] == "extra_forbidden":
        return f"{where}{name}: {_unknown(loc, model, from_env=from_env)}"
    what = _expected(error)
    if not loc:  # the settings as a whole (a rule across sections): the message names them
        return what
    also = "" if from_env or variable is None else f" (or set {variable})"
    return f"{where}{name}: {what}{also}"


def _expected(error: ErrorDetails) -> str:
    message = error["msg"]
    if error["type"] == "missing":
        return "is required"
    for prefix, replacement in (("Input should be ", "should be "), ("Value error, ", "")):
        if message.startswith(prefix):
            return replacement + message[len(prefix) :]
    return message


def _unknown(loc: Location, model: type[BaseModel], *, from_env: bool) -> str:
    """Why an unknown name is refused, with the names that exist where it was given."""
    parent, given = loc[:-1], loc[-1]
    known = fields_at(model, parent)
    if known is None or not isinstance(given, str):
        return "no such setting"
    what = "no such setting" if parent else "no such section or setting"
    close = difflib.get_close_matches(given.lower(), known, n=3, cutoff=0.6)
    if close:
        names = [(*parent, match) for match in close]
        shown = " or ".join(_suggestion(model, n, from_env=from_env) for n in names)
        return f"{what}; did you mean {shown}?"
    section = f"[{dotted(parent)}]" if parent else "the top level"
    return f"{what}; the settings of {section} are {', '.join(sorted(known))}"


def _suggestion(model: type[BaseModel], loc: Location, *, from_env: bool) -> str:
    """A name to use instead, with its variable (a table's variables name a key under it)."""
    table = fields_at(model, loc) is not None or get_origin(_annotation_at(model, loc)) is dict
    name, variable = dotted(loc), env_name(loc) + (f"{ENV_DELIMITER}<KEY>" if table else "")
    if table:
        name = f"[{name}]"
    return f"{variable} ({name})" if from_env else f"{name} ({variable})"


def fields_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str] | None:
    """The setting names of the section at ``loc`` (None: it is not a section of fields,
    e.g. a table of providers or a value)."""
    annotation = _unwrap(_annotation_at(model, loc))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return None


def _annotation_at(model: type[BaseModel], loc: Sequence[str | int]) -> Any:
    """The type of the value at ``loc`` (None: no such setting)."""
    annotation: Any = model
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation = field.annotation
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        elif get_origin(annotation) is list:
            annotation = get_args(annotation)[0]
        else:
            return None
    return annotation


def _unwrap(annotation: Any) -> Any:
    """``X | None`` → ``X`` (the model among the members of a union, if any)."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        models = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
        return (models or members)[0]
    return annotation


def _line_of(loc: Location, lines: Mapping[Location, int]) -> int | None:
    """The line that sets ``loc``, else the nearest enclosing key or table that is written."""
    for end in range(len(loc), 0, -1):
        line = lines.get(loc[:end])
        if line is not None:
            return line
    return None


# --- where each key is written ---------------------------------------------------------------


def key_lines(text: str) -> dict[Location, int]:
    """The first line (from 1) that writes each key path of a TOML document, and each of its
    prefixes. An array of tables adds its index: ``[[server.api_keys]]`` twice gives
    ``("server", "api_keys", 0)`` and ``("server", "api_keys", 1)``."""
    found: dict[Location, int] = {}
    table: Location = ()
    arrays: dict[Location, int] = {}
    open_string: str | None = None
    depth = 0

    def note(path: Location, line: int) -> None:
        for end in range(1, len(path) + 1):
            found.setdefault(path[:end], line)

    for number, line in enumerate(text.splitlines(), start=1):
        if open_string is not None:
            if open_string in line:
                open_string = None
            continue
        if depth > 0:
            depth += _bracket_depth(line)
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("[["):
            array = _key_path(stripped[2:].split("]]", 1)[0])
            arrays[array] = arrays.get(array, -1) + 1
            table = (*array, arrays[array])
            note(table, number)
            continue
        if stripped.startswith("["):
            table = _key_path(stripped[1:].split("]", 1)[0])
            note(table, number)
            continue
        key, equals, value = _split_key(stripped)
        if not equals:
            continue
        note((*table, *_key_path(key)), number)
        value = value.strip()
        for quotes in ('"""', "'''"):
            if value.startswith(quotes) and value.count(quotes) == 1:
                open_string = quotes
        if open_string is None:
            depth = max(_bracket_depth(value), 0)
    return found


def _split_key(line: str) -> tuple[str, bool, str]:
    """``key`` and the value after the first ``=`` outside quotes."""
    quote: str | None = None
    for index, char in enumerate(line):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "=":
            return line[:index], True, line[index + 1 :]
    return line, False, ""


def _key_path(key: str) -> Location:
    """``a."b.c".d`` → ``("a", "b.c", "d")``."""
    parts: list[str] = []
    current = ""
    quote: str | None = None
    for char in key.strip():
        if quote is not None:
            current += char
            if char == quote and not (quote == '"' and current.endswith('\\"')):
                quote = None
        elif char in "\"'":
            quote = char
            current += char
        elif char == ".":
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return tuple(_unquote(part.strip()) for part in parts)


def _unquote(part: str) -> str:
    if len(part) >= 2 and part[0] == part[-1] == '"':
        try:
            return str(json.loads(part))
        except ValueError:
            return part[1:-1]
    if len(part) >= 2 and part[0] == part[-1] == "'":
        return part[1:-1]
    return part


def _bracket_depth(text: str) -> int:
    """Brackets and braces opened minus closed, outside strings and comments."""
    depth = 0
    quote: str | None = None
    escaped = False
    for char in text:
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return depth
