"""Python type annotations of the settings and the events, said in words for the reference
pages."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, JsonValue, SecretStr

NAMES: dict[Any, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    Path: "path",
    SecretStr: "string (secret)",
    datetime: "time (RFC 3339)",
    Any: "any value",
}


def strip_none(annotation: Any) -> Any:
    """``X`` for ``X | None``; the annotation itself otherwise."""
    if get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def type_name(annotation: Any, model: Callable[[type[BaseModel]], str]) -> str:
    """``annotation`` in words; ``model`` names a pydantic model (a link, or "table")."""
    if annotation is JsonValue:
        return "any value"
    inner = strip_none(annotation)
    if inner is not annotation:
        return type_name(inner, model)
    origin = get_origin(inner)
    if origin is Literal:
        return " \\| ".join(f'`"{value}"`' for value in get_args(inner))
    if origin is list:
        return f"list of {type_name(get_args(inner)[0], model)}"
    if origin is dict:
        return f"table of {type_name(get_args(inner)[1], model)}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(arg, model) for arg in get_args(inner))
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return model(inner)
    return NAMES.get(inner, getattr(inner, "__name__", str(inner)))


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation names, at any depth."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        found += models_in(arg)
    return found
