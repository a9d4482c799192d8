"""An ACP agent's form elicitation (``elicitation/create``, mode ``form``) as the gateway's
questions, and the answers back as the ``accept`` that carries them (pure, no I/O).

A form is a flat JSON schema of named fields. Each field that can be asked becomes one
question, in the schema's order: a string with ``oneOf`` (titled) or ``enum`` values is a
choice of one, an ``array`` whose ``items`` hold ``anyOf`` or ``enum`` a choice of several, a
``boolean`` a choice of "Yes" or "No", a plain string a question answered in the user's own
words. A plain string field named after a choice field plus ``_custom`` is that question's
"Other" box (its ``free_text``), not a question of its own. A form with a field of any other
kind (numbers, extensions) is not asked: the gateway has no way to take its value.

The Claude Agent ACP adapter 0.101.0 asks Claude Code's AskUserQuestion this way
(dist/elicitation.js ``askUserQuestionsToCreateRequest``): ``question_<n>`` (titled ``oneOf``,
or an ``array`` of ``anyOf`` when multi-select, ``title`` = the question's header,
``description`` = its text unless there is one question, whose text is the ``message``) and
``question_<n>_custom`` (a plain string). It reads an ``accept`` back into the tool's answers:
the chosen labels, the custom text added to a multi-select's picks, or as the answer of a
single-select left unpicked (a note beside a pick); ``decline`` reads as every question
skipped (the turn goes on), ``cancel`` aborts the tool call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acp.schema import ElicitationSchema
from pydantic import JsonValue

from app.events import Question, QuestionOption
from app.providers.base import Answers, QuestionRequest
from app.providers.raw import as_dict, as_list, as_str

__all__ = ["ELICITATION_TOOL", "Form", "FormField", "accepted_content", "read_form"]

ELICITATION_TOOL = "elicitation"
"""``QuestionRequest.tool`` of a question asked by form elicitation."""

CUSTOM_SUFFIX = "_custom"
YES, NO = "Yes", "No"


@dataclass(frozen=True, kw_only=True)
class FormField:
    """One question of the form and where its answer goes in the ``accept``'s content."""

    name: str
    kind: str
    """``choice`` (one value), ``choices`` (a list), ``boolean`` or ``text``."""
    values: dict[str, JsonValue]
    """The value each offered label stands for (an option's ``const``)."""
    custom: str | None = None
    """The field that takes the user's own text beside the choice (``<name>_custom``)."""


@dataclass(frozen=True, kw_only=True)
class Form:
    """The questions a form asks, and how to answer it."""

    request: QuestionRequest
    fields: tuple[FormField, ...]


def read_form(
    request_id: str,
    message: str,
    schema: ElicitationSchema | dict[str, Any],
    *,
    tool_id: str | None = None,
) -> Form | None:
    """The questions of a form's ``requestedSchema`` (the SDK's model or its JSON); None
    when it has none, or a field the gateway cannot ask."""
    if isinstance(schema, ElicitationSchema):
        schema = schema.model_dump(mode="json", by_alias=True, exclude_none=True)
    properties = as_dict(schema.get("properties"))
    choices = {
        name for name, raw in properties.items() if _choice(as_dict(raw)) or _multi(as_dict(raw))
    }
    companions = {
        name
        for name, raw in properties.items()
        if name.endswith(CUSTOM_SUFFIX)
        and name.removesuffix(CUSTOM_SUFFIX) in choices
        and _plain_string(as_dict(raw))
    }
    asked = [name for name in properties if name not in companions]
    fields: list[FormField] = []
    questions: list[Question] = []
    for name in asked:
        prop = as_dict(properties[name])
        title = as_str(prop.get("title"))
        prompt = as_str(prop.get("description")) or (message if len(asked) == 1 else None)
        custom = name + CUSTOM_SUFFIX if name + CUSTOM_SUFFIX in companions else None
        kind, options = _read_field(prop)
        if kind is None:
            return None
        values: dict[str, JsonValue] = {}
        offered: list[QuestionOption] = []
        for label, value, description in options:
            if label not in values:
                values[label] = value
                offered.append(QuestionOption(label=label, description=description))
        fields.append(FormField(name=name, kind=kind, values=values, custom=custom))
        questions.append(
            Question(
                prompt=prompt or title or message or name,
                header=title if prompt else None,
                options=offered,
                multi_select=kind == "choices",
                free_text=kind == "text" or custom is not None,
            )
        )
    if not questions:
        return None
    request = QuestionRequest(
        request_id=request_id, tool=ELICITATION_TOOL, questions=tuple(questions), tool_id=tool_id
    )
    return Form(request=request, fields=tuple(fields))


def accepted_content(form: Form, answers: Answers) -> dict[str, JsonValue] | None:
    """The ``content`` of the ``accept`` that answers ``form``: each field's chosen values and
    text under the schema's own names; None when nobody answered (the form is declined)."""
    if answers is None:
        return None
    content: dict[str, JsonValue] = {}
    for field, answer in zip(form.fields, answers, strict=True):
        picked = [field.values[label] for label in answer.selected if label in field.values]
        own = answer.text.strip() if answer.text is not None else ""
        match field.kind:
            case "choices":
                if picked:
                    content[field.name] = picked
            case "choice" | "boolean":
                if picked:
                    content[field.name] = picked[0]
            case _:
                if own:
                    content[field.name] = own
        if field.custom is not None and own:
            content[field.custom] = own
    return content


_Option = tuple[str, JsonValue, str | None]


def _read_field(prop: dict[str, Any]) -> tuple[str | None, list[_Option]]:
    kind = prop.get("type")
    if kind == "boolean":
        return "boolean", [(YES, True, None), (NO, False, None)]
    if kind == "string":
        if _choice(prop):
            return "choice", _options(prop)
        return "text", []
    if kind == "array" and _multi(prop):
        return "choices", _options(as_dict(prop.get("items")))
    return None, []


def _choice(prop: dict[str, Any]) -> bool:
    return prop.get("type") == "string" and bool(_options(prop))


def _multi(prop: dict[str, Any]) -> bool:
    return prop.get("type") == "array" and bool(_options(as_dict(prop.get("items"))))


def _plain_string(prop: dict[str, Any]) -> bool:
    return prop.get("type") == "string" and not _options(prop)


def _options(prop: dict[str, Any]) -> list[_Option]:
    """The values a field (or an array's ``items``) offers: titled (``oneOf`` / ``anyOf`` of
    ``{const, title, description}``) or untitled (``enum``)."""
    titled = as_list(prop.get("oneOf")) or as_list(prop.get("anyOf"))
    if titled:
        options: list[_Option] = []
        for raw in titled:
            option = as_dict(raw)
            value = as_str(option.get("const"))
            if value:
                label = as_str(option.get("title")) or value
                options.append((label, value, as_str(option.get("description"))))
        return options
    return [(value, value, None) for raw in as_list(prop.get("enum")) if (value := as_str(raw))]
