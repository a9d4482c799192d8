"""docs/reference/configuration.md: every setting of the settings model (``app.settings``
and the ``*_settings`` modules it is built from), with its type, default, environment
variable and description, read from the model itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from docpages.docstrings import attribute_docs, cell, class_doc, markdown
from docpages.types import strip_none, type_name

MACHINE_DEFAULTS = {
    "storage.data_dir": "`$XDG_DATA_HOME/agent-gateway` (`~/.local/share/agent-gateway`)",
    "workspaces.roots": "`[$HOME]`",
    "cluster.replica_id": "host name and process id",
}
"""Defaults computed on the machine that starts the gateway, shown as the rule that makes
them rather than as this machine's value."""


@dataclass(frozen=True)
class Setting:
    """One row of the reference."""

    path: str
    """Its place in the TOML file, dotted (``server.port``, ``providers.<name>.model``)."""
    env: str | None
    """The environment variable that sets it; None for a field of a list's items."""
    kind: str
    default: str
    description: str


class Undocumented(Exception):
    """Settings without a description: the reference would not say what they do."""


def settings_rows(model: type[BaseModel]) -> list[tuple[str, str, list[Setting]]]:
    """The reference's sections: (title, the section's description, its settings). Top-level
    scalar settings come first, then one section per nested table, in the model's order.
    Raises ``Undocumented`` naming every setting (or section) without a description."""
    docs = attribute_docs(model)
    top: list[Setting] = []
    sections: list[tuple[str, str, list[Setting]]] = []
    missing: list[str] = []
    for name, field in model.model_fields.items():
        section = _model_of(field.annotation)
        if section is None and _keyed_model(field.annotation) is not None:
            rows = list(_rows(name, f"GATEWAY_{name.upper()}", field, docs.get(name), missing))
            sections.append((f"[{name}.<name>]", rows[0].description, rows[1:]))
            continue
        if section is None:
            top.extend(_rows(name, f"GATEWAY_{name.upper()}", field, docs.get(name), missing))
            continue
        about = docs.get(name) or class_doc(section)
        if not about:
            missing.append(f"[{name}] (the section)")
        rows = list(_children(name, f"GATEWAY_{name.upper()}", section, missing))
        sections.append((f"[{name}]", markdown(about), rows))
    if missing:
        raise Undocumented("settings without a description: " + ", ".join(missing))
    return [("Top level", "Settings outside any table.", top), *sections]


def _children(
    prefix: str, env: str | None, model: type[BaseModel], missing: list[str]
) -> Iterator[Setting]:
    docs = attribute_docs(model)
    for name, field in model.model_fields.items():
        path = f"{prefix}.{name}"
        child_env = None if env is None else f"{env}__{name.upper()}"
        yield from _rows(path, child_env, field, docs.get(name) or field.description, missing)


def _rows(
    path: str, env: str | None, field: FieldInfo, doc: str | None, missing: list[str]
) -> Iterator[Setting]:
    """The setting at ``path``, then the settings inside it (a table, a table of tables
    keyed by a name, or a list of tables)."""
    annotation = field.annotation
    nested = _model_of(annotation)
    member = _keyed_model(annotation)
    items = _listed_model(annotation)
    description = doc or (class_doc(nested) if nested else "")
    if not description:
        missing.append(path)
    yield Setting(
        path=path,
        env=env,
        kind=_kind(annotation, field.metadata),
        default=_default(path, field),
        description=markdown(description),
    )
    if nested is not None:
        yield from _children(path, env, nested, missing)
    elif member is not None:
        placeholder = _placeholder(path)
        yield from _children(
            f"{path}.<{placeholder}>",
            None if env is None else f"{env}__<{placeholder.upper()}>",
            member,
            missing,
        )
    elif items is not None:
        yield from _children(f"{path}[]", None, items, missing)


def _placeholder(path: str) -> str:
    return {"retry.strategies": "strategy"}.get(path, "name")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    inner = strip_none(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return inner
    return None


def _keyed_model(annotation: Any) -> type[BaseModel] | None:
    inner = strip_none(annotation)
    if get_origin(inner) is dict:
        return _model_of(get_args(inner)[1])
    return None


def _listed_model(annotation: Any) -> type[BaseModel] | None:
    inner = strip_none(annotation)
    if get_origin(inner) is list:
        return _model_of(get_args(inner)[0])
    return None


def _kind(annotation: Any, metadata: list[Any]) -> str:
    text = type_name(annotation, lambda _model: "table").replace(" of table", " of tables")
    bounds = _bounds(metadata)
    return f"{text} ({bounds})" if bounds else text


def _bounds(metadata: list[Any]) -> str:
    said: list[str] = []
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            said.append(f"≥ {_number(item.ge)}")
        elif isinstance(item, annotated_types.Gt):
            said.append(f"> {_number(item.gt)}")
        elif isinstance(item, annotated_types.Le):
            said.append(f"≤ {_number(item.le)}")
        elif isinstance(item, annotated_types.Lt):
            said.append(f"< {_number(item.lt)}")
        elif isinstance(item, annotated_types.MinLen):
            said.append(f"at least {item.min_length}")
    return ", ".join(said)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and value >= 1024 and value % 1024 == 0:
        return f"{value} ({_binary(value)})"
    return str(value)


def _binary(value: int) -> str:
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value //= 1024
        if value < 1024 or value % 1024:
            return f"{value} {unit}"
    return f"{value} TiB"


def _default(path: str, field: FieldInfo) -> str:
    if path in MACHINE_DEFAULTS:
        return MACHINE_DEFAULTS[path]
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "(the table's own defaults)"
    shown = _toml(value)
    if path.endswith("_bytes") and isinstance(value, int) and value >= 1024:
        return f"`{shown}` ({_binary(value)})"
    return f"`{shown}`"


def _toml(value: Any) -> str:
    """``value`` written as in the TOML file (inline)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Path):
        return json.dumps(str(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }"
    return str(value)


INTRO = """\
# Configuration reference

<!-- Generated by scripts/gen_docs.py from the settings model (app/settings.py and the
*_settings.py modules it is built from). Do not edit: change a setting's docstring and run
`python scripts/gen_docs.py`. -->

The gateway reads a TOML file named by `--config` or `GATEWAY_CONFIG`; every setting can be
overridden by an environment variable named after its path, `GATEWAY_` and the path in capitals
with `__` between levels: `GATEWAY_SERVER__PORT=9000`,
`GATEWAY_PROVIDERS__CLAUDE_CODE__MODEL=claude-sonnet-4-5`. A list or a table given in a
variable is written as JSON (`GATEWAY_SERVER__ALLOWED_HOSTS='["gateway.example.com"]'`); the
variable wins over the file. Invalid configuration stops the start with a message naming each
bad setting, and an unknown key is refused rather than ignored.

```toml
[server]
port = 8765

[workspaces]
roots = ["/home/me/src"]

[providers.claude_code]
model = "claude-sonnet-4-5"
env = { ANTHROPIC_BASE_URL = "http://127.0.0.1:4000", ANTHROPIC_API_KEY = "…" }
```

How to read the tables: *unset* means the setting has no value unless you give one (its
description says what happens then). `<name>` stands for a name you choose: a provider
(`claude_code`, `codex`, `opencode`, `acp:gemini`, …; a name with a colon is quoted in TOML,
`[providers."acp:gemini"]`), an API key's name, a retry strategy's. A field of a list's items
(`server.api_keys[].name`) has no variable of its own: set the whole list.
"""


def anchor(path: str) -> str:
    """The id of a setting's row, to link to: its path without the placeholders' brackets
    (``providers.name.model``, ``server.api_keys.name``)."""
    return path.replace("<", "").replace(">", "").replace("[]", "")


def render(model: type[BaseModel]) -> str:
    """The page."""
    parts = [INTRO]
    for title, about, rows in settings_rows(model):
        name = title.strip("[]").split(".")[0].lower().replace(" ", "-")
        shown = f"`{title}`" if title.startswith("[") else title
        parts.append(f"\n## {shown} {{#section-{name}}}\n\n{about}\n\n")
        parts.append("| setting | type | default | environment variable | what it does |\n")
        parts.append("|---|---|---|---|---|\n")
        for row in rows:
            env = f"`{row.env}`" if row.env else "—"
            parts.append(
                f'| <span id="{anchor(row.path)}"></span>`{row.path}` | {row.kind} | '
                f"{cell(row.default)} | {env} | {cell(row.description)} |\n"
            )
    return "".join(parts)
