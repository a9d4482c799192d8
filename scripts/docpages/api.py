"""docs/reference/api.md: the HTTP API as docs/openapi.json describes it (operations,
parameters, bodies, responses, schemas), and the problem types the gateway answers with (the
``GatewayError`` tree of app/errors.py and the modules that extend it)."""

from __future__ import annotations

from typing import Any

from docpages.docstrings import cell, class_doc, markdown

Schema = dict[str, Any]

TAGS = {
    "sessions": "Sessions, turns, approvals, questions",
    "events": "Events",
    "changes": "Changes and revert",
    "runs": "Runs",
    "providers": "Providers",
    "usage": "Usage",
    "webhooks": "Webhooks (admin)",
    "health": "Health and metrics",
}
"""The sections operations are grouped in, by their OpenAPI tag, in this order."""

FRAMEWORK_PROBLEMS = [
    (422, "validation_failed", "A body, parameter or header is invalid; `errors` names each."),
    (404, "not_found", "No route (or no such resource)."),
    (405, "method_not_allowed", "The route does not take this method (`Allow` lists them)."),
]
"""Problems the API layer answers itself (app/api/problems.py), outside the error tree."""


def ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def schema_link(name: str) -> str:
    return f"[{name}](#schema-{name.lower()})"


def type_of(schema: Schema) -> str:
    """A JSON schema in words, with links to the named schemas."""
    if "$ref" in schema:
        return schema_link(ref_name(schema["$ref"]))
    if "const" in schema:
        return f'`"{schema["const"]}"`'
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    for combined in ("anyOf", "oneOf"):
        if combined in schema:
            options = [type_of(option) for option in schema[combined]]
            return " or ".join(dict.fromkeys(options))
    kind = schema.get("type")
    if kind == "array":
        return f"list of {type_of(schema.get('items', {}))}"
    if kind == "object" or "additionalProperties" in schema:
        values = schema.get("additionalProperties")
        return f"object of {type_of(values)}" if isinstance(values, dict) else "object"
    if kind is None:
        return "any"
    text = str(kind)
    if "format" in schema:
        text += f" ({schema['format']})"
    return text


def _parameters(operation: Schema) -> str:
    parameters = operation.get("parameters", [])
    if not parameters:
        return ""
    rows = ["| parameter | in | type | required | |\n", "|---|---|---|---|---|\n"]
    for parameter in parameters:
        schema = parameter.get("schema", {})
        about = parameter.get("description") or schema.get("description", "")
        rows.append(
            f"| `{parameter['name']}` | {parameter['in']} | {type_of(schema)} | "
            f"{'yes' if parameter.get('required') else 'no'} | {cell(about)} |\n"
        )
    return "**Parameters**\n\n" + "".join(rows) + "\n"


def _body(operation: Schema) -> str:
    body = operation.get("requestBody")
    if not body:
        return ""
    lines = []
    for media, content in body.get("content", {}).items():
        lines.append(f"`{media}`: {type_of(content.get('schema', {}))}")
    required = " (required)" if body.get("required") else ""
    return f"**Body**{required}: " + "; ".join(lines) + "\n\n"


def _responses(operation: Schema) -> str:
    rows = ["| status | content | |\n", "|---|---|---|\n"]
    for status, response in sorted(operation.get("responses", {}).items()):
        contents = [
            f"`{media}` {type_of(content.get('schema', {}))}".strip()
            for media, content in response.get("content", {}).items()
        ]
        about = response.get("description", "")
        headers = ", ".join(f"`{name}`" for name in response.get("headers", {}))
        if headers:
            about += f" (headers: {headers})"
        rows.append(f"| {status} | {cell('; '.join(contents)) or '—'} | {cell(about)} |\n")
    return "**Responses**\n\n" + "".join(rows)


def _operations(document: Schema) -> str:
    grouped: dict[str, list[tuple[str, str, Schema]]] = {tag: [] for tag in TAGS}
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            tag = (operation.get("tags") or ["other"])[0]
            grouped.setdefault(tag, []).append((method.upper(), path, operation))
    parts = []
    for tag, operations in grouped.items():
        if not operations:
            continue
        parts.append(f"\n## {TAGS.get(tag, tag)}\n")
        for method, path, operation in operations:
            key = (
                "no key"
                if operation.get("security") == [] or "security" not in operation
                else "key"
            )
            parts.append(f"\n### `{method} {path}` {{#{operation['operationId']}}}\n\n")
            parts.append(f"`{operation['operationId']}` · {key}\n\n")
            if operation.get("description"):
                parts.append(markdown(operation["description"]) + "\n\n")
            parts.append(_parameters(operation) + _body(operation) + _responses(operation))
    return "".join(parts)


def _schemas(document: Schema) -> str:
    parts = ["\n## Schemas\n"]
    for name, schema in sorted(document["components"]["schemas"].items()):
        parts.append(f"\n### {name} {{#schema-{name.lower()}}}\n\n")
        if schema.get("description"):
            parts.append(markdown(schema["description"]) + "\n\n")
        properties = schema.get("properties")
        if not properties:
            parts.append(f"{type_of({k: v for k, v in schema.items() if k != 'title'})}\n")
            continue
        required = set(schema.get("required", []))
        parts.append("| property | type | required | |\n|---|---|---|---|\n")
        for prop, spec in properties.items():
            about = spec.get("description", "")
            parts.append(
                f"| `{prop}` | {cell(type_of(spec))} | {'yes' if prop in required else 'no'} | "
                f"{cell(about)} |\n"
            )
    return "".join(parts)


def _problems() -> str:
    from app import main  # noqa: F401, PLC0415 - every module that extends the error tree
    from app.errors import PROBLEM_BASE, GatewayError  # noqa: PLC0415

    found: dict[tuple[int, str], str] = {}

    def walk(cls: type[GatewayError]) -> None:
        for sub in cls.__subclasses__():
            about = class_doc(sub) or sub.title
            key = (sub.status, sub.type)
            if key not in found or len(about) > len(found[key]):
                found[key] = about
            walk(sub)

    walk(GatewayError)
    for status, slug, about in FRAMEWORK_PROBLEMS:
        found.setdefault((status, slug), about)
    rows = ["| status | type | when |\n", "|---|---|---|\n"]
    for (status, slug), about in sorted(found.items()):
        rows.append(f"| {status} | `{slug}` | {cell(about)} |\n")
    return (
        "\n## Problem types\n\nEvery error is `application/problem+json` (RFC 9457): `type` is "
        f"`{PROBLEM_BASE}<type>`, `detail` says what to fix, and fields a program can use "
        "ride along (`turn_id` on `turn_in_progress`, `limit` on a 429, `errors` on a 422). "
        "A 429 and a 503 carry `Retry-After`.\n\n" + "".join(rows)
    )


INTRO = """\
# HTTP API reference

<!-- Generated by scripts/gen_docs.py from docs/openapi.json (scripts/export_openapi.py
writes it from the app) and the error tree of app/errors.py. Do not edit. -->

The gateway's contract is [`openapi.json`](../openapi.json) (also served at `GET /openapi.json`
with a key). This page is that document in prose: each operation with its parameters, body
and responses, then every schema, then the problem types. How the API is used (keys, pages,
idempotency keys, the WebSocket frames) is in [Using the API](../api.md).

*key*: the operation needs `Authorization: Bearer <key>`; *no key*: it does not.
"""


def render(document: Schema) -> str:
    """The page, from the OpenAPI document."""
    version = document["info"]["version"]
    return (
        INTRO
        + f"\nAPI version {version}.\n"
        + _operations(document)
        + _problems()
        + _schemas(document)
    )
