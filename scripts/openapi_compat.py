"""Breaking changes between two OpenAPI documents, from a client's point of view.

``breaking_changes(old, new)`` lists what would break a client written against ``old``:

- a removed path, operation, operationId (or one renamed), or response status;
- a removed request parameter or body property, a newly required one, a tightened
  constraint (length, range, pattern) or a narrowed type or enum on the request side;
- a removed response property or media type, a property that is no longer required, a
  changed type (a new ``null`` included) or an enum that gained values on the response side
  (clients that check enums, as generated ones do, reject the new value);
- a security requirement added to an operation that had none.

What a client cannot notice is not reported: new operations, new optional request fields,
new response fields, wider request types, new members of a response union (the event union
grows by design: clients skip event types they do not know).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Direction = Literal["request", "response"]
Schema = Mapping[str, Any]
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_DEPTH = 32
"""Unions nested deeper than this (a recursive schema) count as admitting anything."""
_LOWER_BOUNDS = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_UPPER_BOUNDS = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")


def _resolve(document: Schema, schema: Schema) -> tuple[str | None, Schema]:
    """The schema a ``$ref`` points to (one level at a time), and the name it had."""
    name = None
    seen: set[str] = set()
    while "$ref" in schema and schema["$ref"] not in seen:
        ref: str = schema["$ref"]
        seen.add(ref)
        name = ref.rsplit("/", 1)[-1]
        target: Any = document
        for part in ref.removeprefix("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        schema = target
    return name, schema


def _members(schema: Schema) -> list[Schema] | None:
    for key in ("anyOf", "oneOf"):
        if key in schema:
            members: list[Schema] = schema[key]
            return members
    return None


def _const_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@dataclass
class _Compare:
    old_doc: Schema
    new_doc: Schema
    found: list[str] = field(default_factory=list)
    _seen: set[tuple[str | None, str | None, str]] = field(default_factory=set)

    def kinds(self, document: Schema, schema: Schema, depth: int = 0) -> frozenset[str] | None:
        """The JSON types a schema admits; None for any."""
        _, schema = _resolve(document, schema)
        if depth > MAX_DEPTH:
            return None
        if "const" in schema:
            return frozenset({_const_type(schema["const"])})
        if "enum" in schema:
            return frozenset(_const_type(v) for v in schema["enum"])
        if "type" in schema:
            declared = schema["type"]
            return frozenset(declared if isinstance(declared, list) else [declared])
        members = _members(schema)
        if members is not None:
            found: set[str] = set()
            for member in members:
                kinds = self.kinds(document, member, depth + 1)
                if kinds is None:
                    return None
                found |= kinds
            return frozenset(found)
        if schema.get("allOf"):
            return self.kinds(document, schema["allOf"][0], depth + 1)
        return None

    def values(self, document: Schema, schema: Schema, depth: int = 0) -> frozenset[str] | None:
        """The values an enum (or a union of enums and null) admits; None when not an enum."""
        _, schema = _resolve(document, schema)
        if depth > MAX_DEPTH:
            return None
        if "const" in schema:
            return frozenset({repr(schema["const"])})
        if "enum" in schema:
            return frozenset(repr(v) for v in schema["enum"])
        members = _members(schema)
        if members is None:
            return None
        found: set[str] = set()
        for member in members:
            _, resolved = _resolve(document, member)
            if resolved.get("type") == "null":
                found.add("None")
                continue
            values = self.values(document, member, depth + 1)
            if values is None:
                return None
            found |= values
        return frozenset(found)

    def schema(self, old: Schema, new: Schema, where: str, direction: Direction) -> None:
        old_name, old_s = _resolve(self.old_doc, old)
        new_name, new_s = _resolve(self.new_doc, new)
        key = (old_name, new_name, direction)
        if old_name is not None and key in self._seen:
            return  # a recursive schema: compared once
        if old_name is not None:
            self._seen.add(key)
        self._types(old_s, new_s, where, direction)
        self._enums(old_s, new_s, where, direction)
        if direction == "request":
            self._bounds(old_s, new_s, where)
        self._properties(old_s, new_s, where, direction)
        self._union(old_s, new_s, where, direction)
        for keyword in ("items", "additionalProperties"):
            old_sub, new_sub = old_s.get(keyword), new_s.get(keyword)
            if isinstance(old_sub, Mapping) and isinstance(new_sub, Mapping):
                suffix = "[]" if keyword == "items" else ".*"
                self.schema(old_sub, new_sub, where + suffix, direction)

    def _types(self, old: Schema, new: Schema, where: str, direction: Direction) -> None:
        old_kinds, new_kinds = self.kinds(self.old_doc, old), self.kinds(self.new_doc, new)
        if old_kinds == new_kinds:
            return
        if direction == "request":
            narrowed = new_kinds is not None and (
                old_kinds is None or not _within(old_kinds, new_kinds)
            )
            if narrowed:
                self.found.append(
                    f"{where}: accepts {_show(new_kinds)} now, was {_show(old_kinds)}"
                )
        else:
            widened = old_kinds is not None and (
                new_kinds is None or not _within(new_kinds, old_kinds)
            )
            if widened:
                self.found.append(
                    f"{where}: type is {_show(new_kinds)} now, was {_show(old_kinds)}"
                )

    def _enums(self, old: Schema, new: Schema, where: str, direction: Direction) -> None:
        old_values, new_values = self.values(self.old_doc, old), self.values(self.new_doc, new)
        if old_values is None or old_values == new_values:
            return
        if new_values is None:
            if direction == "response":
                self.found.append(f"{where}: no longer a closed set of values")
            return
        if direction == "request" and old_values - new_values:
            gone = ", ".join(sorted(old_values - new_values))
            self.found.append(f"{where}: enum narrowed, no longer accepts {gone}")
        if direction == "response" and new_values - old_values:
            added = ", ".join(sorted(new_values - old_values))
            self.found.append(f"{where}: enum gained {added} (clients that check enums fail)")

    def _bounds(self, old: Schema, new: Schema, where: str) -> None:
        for keyword in _LOWER_BOUNDS:
            if keyword in new and (keyword not in old or new[keyword] > old[keyword]):
                self.found.append(f"{where}: {keyword} raised to {new[keyword]}")
        for keyword in _UPPER_BOUNDS:
            if keyword in new and (keyword not in old or new[keyword] < old[keyword]):
                self.found.append(f"{where}: {keyword} lowered to {new[keyword]}")
        if "pattern" in new and new.get("pattern") != old.get("pattern"):
            self.found.append(f"{where}: pattern is {new['pattern']!r} now")

    def _properties(self, old: Schema, new: Schema, where: str, direction: Direction) -> None:
        old_props: Mapping[str, Schema] = old.get("properties", {})
        new_props: Mapping[str, Schema] = new.get("properties", {})
        old_required, new_required = set(old.get("required", [])), set(new.get("required", []))
        prefix = f"{where}." if where else ""
        for name in sorted(old_props):
            if name not in new_props:
                self.found.append(f"{prefix}{name}: {direction} property removed")
                continue
            if direction == "response" and name in old_required and name not in new_required:
                self.found.append(f"{prefix}{name}: response property no longer required")
            self.schema(old_props[name], new_props[name], prefix + name, direction)
        if direction == "request":
            for name in sorted(new_required - old_required):
                self.found.append(f"{prefix}{name}: request property newly required")
            if old.get("additionalProperties") is not False and (
                new.get("additionalProperties") is False
            ):
                self.found.append(f"{where or 'body'}: no longer accepts other properties")

    def _union(self, old: Schema, new: Schema, where: str, direction: Direction) -> None:
        old_members, new_members = _members(old), _members(new)
        if old_members is None or new_members is None:
            return
        new_by_name = {
            name: member
            for member in new_members
            if (name := _resolve(self.new_doc, member)[0]) is not None
        }
        for member in old_members:
            name, _ = _resolve(self.old_doc, member)
            if name is None:
                continue  # inline members (scalars, null) are covered by the type check
            if name in new_by_name:
                self.schema(member, new_by_name[name], f"{where}<{name}>", direction)
            elif direction == "request":
                self.found.append(f"{where}: no longer accepts a {name}")
            else:
                self.found.append(f"{where}: no longer sends a {name}, or it was renamed")


def _within(inner: frozenset[str], outer: frozenset[str]) -> bool:
    return all(k in outer or (k == "integer" and "number" in outer) for k in inner)


def _show(kinds: frozenset[str] | None) -> str:
    return "anything" if kinds is None else " | ".join(sorted(kinds))


def _operations(document: Schema) -> Iterator[tuple[str, str, Schema]]:
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def _json_bodies(holder: Schema) -> dict[str, Schema]:
    content: Mapping[str, Schema] = holder.get("content", {})
    return {media: body.get("schema", {}) for media, body in content.items()}


def breaking_changes(old: Schema, new: Schema) -> list[str]:
    """Every change from ``old`` to ``new`` that can break a client of ``old``."""
    compare = _Compare(old, new)
    found = compare.found
    new_ops = {(path, method): op for path, method, op in _operations(new)}
    for path, method, old_op in _operations(old):
        label = f"{method.upper()} {path}"
        old_id = old_op.get("operationId")
        new_op = new_ops.get((path, method))
        if new_op is None:
            found.append(f"{label} ({old_id}): operation removed")
            continue
        if old_id is not None and new_op.get("operationId") != old_id:
            found.append(f"{label}: operationId {old_id} is {new_op.get('operationId')} now")
        name = old_id or label
        _parameters(compare, old_op, new_op, name)
        _request_body(compare, old_op, new_op, name)
        _responses(compare, old_op, new_op, name)
        if not old_op.get("security") and new_op.get("security"):
            found.append(f"{name}: now requires {new_op['security']}")
    return found


def _parameters(compare: _Compare, old_op: Schema, new_op: Schema, name: str) -> None:
    def keyed(op: Schema) -> dict[tuple[str, str], Schema]:
        return {(p["in"], p["name"].lower()): p for p in op.get("parameters", [])}

    old_params, new_params = keyed(old_op), keyed(new_op)
    for key, param in old_params.items():
        where = f"{name} {key[0]} parameter {param['name']}"
        if key not in new_params:
            compare.found.append(f"{where}: removed")
            continue
        if new_params[key].get("required") and not param.get("required"):
            compare.found.append(f"{where}: newly required")
        compare.schema(param.get("schema", {}), new_params[key].get("schema", {}), where, "request")
    for key, param in new_params.items():
        if key not in old_params and param.get("required"):
            compare.found.append(f"{name} {key[0]} parameter {param['name']}: new and required")


def _request_body(compare: _Compare, old_op: Schema, new_op: Schema, name: str) -> None:
    old_body, new_body = old_op.get("requestBody"), new_op.get("requestBody")
    if new_body is None:
        if old_body is not None:
            compare.found.append(f"{name}: request body removed")
        return
    if old_body is None:
        if new_body.get("required"):
            compare.found.append(f"{name}: request body newly required")
        return
    if new_body.get("required") and not old_body.get("required"):
        compare.found.append(f"{name}: request body newly required")
    old_media, new_media = _json_bodies(old_body), _json_bodies(new_body)
    for media, schema in old_media.items():
        if media not in new_media:
            compare.found.append(f"{name}: request body no longer accepts {media}")
        else:
            compare.schema(schema, new_media[media], f"{name} request body", "request")


def _responses(compare: _Compare, old_op: Schema, new_op: Schema, name: str) -> None:
    old_responses: Mapping[str, Schema] = old_op.get("responses", {})
    new_responses: Mapping[str, Schema] = new_op.get("responses", {})
    for status, old_response in old_responses.items():
        if status not in new_responses:
            compare.found.append(f"{name}: response {status} removed")
            continue
        old_media, new_media = _json_bodies(old_response), _json_bodies(new_responses[status])
        for media, schema in old_media.items():
            if media not in new_media:
                compare.found.append(f"{name} {status}: no longer answers {media}")
            else:
                where = f"{name} {status} {media}"
                compare.schema(schema, new_media[media], where, "response")
