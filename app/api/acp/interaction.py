"""Approvals as ACP permission requests and questions as ACP form elicitations, and the
client's answers back as the gateway's (pure).

**Permissions.** Each offered decision is one ``PermissionOption`` whose ``optionId`` is the
decision itself: ``allow`` (``allow_once``), ``allow_session`` (``allow_always``), ``deny``
(``reject_once``); the labels are the approval's. The option the client selects is that
decision; a cancelled request, or an option that was not offered, is ``deny``.

**Questions.** A question is one field of a flat form, in order, named ``question_<n>``
(from 0), as the Claude adapter asks Claude Code's questions (and as the gateway's own ACP
client reads them back, ``app/providers/acp/elicitation.py``): a choice of one is a string
with titled ``oneOf`` values, a choice of several an ``array`` whose ``items`` hold titled
``anyOf`` values, each value an offered label; a question answered only in the user's own
words is a plain string. A choice that also takes the user's own words has a plain string
companion, ``question_<n>_custom``. Each field's ``title`` is the question's header and its
``description`` the question (one question: the form's message is the question).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from acp.schema import (
    AllowedOutcome,
    ElicitationMultiSelectPropertySchema,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    EnumOption,
    PermissionOption,
    PermissionOptionKind,
    RequestPermissionResponse,
    TitledMultiSelectItems,
    ToolCallUpdate,
)

from app.api.acp.toolcalls import tool_call_view
from app.events import (
    ApprovalDecision,
    ApprovalOption,
    ApprovalRequested,
    Question,
    QuestionAnswer,
    QuestionAsked,
)

__all__ = [
    "ElicitationForm",
    "answers_from",
    "decision_for",
    "elicitation_form",
    "permission_options",
    "tool_call_for_approval",
]

_OPTION_KINDS: Mapping[ApprovalDecision, PermissionOptionKind] = {
    "allow": "allow_once",
    "allow_session": "allow_always",
    "deny": "reject_once",
}
CUSTOM_SUFFIX = "_custom"


def permission_options(options: Sequence[ApprovalOption]) -> list[PermissionOption]:
    """The ACP options of an approval's ``options``, in its order."""
    return [
        PermissionOption(
            option_id=option.decision, name=option.label, kind=_OPTION_KINDS[option.decision]
        )
        for option in options
    ]


def decision_for(
    response: RequestPermissionResponse, offered: Sequence[ApprovalOption] | None = None
) -> ApprovalDecision:
    """The decision the client's answer stands for: the selected option's, or ``deny`` when
    it cancelled or selected an option not in ``offered`` (None: any of ours)."""
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome):
        return "deny"
    decisions = [o.decision for o in offered] if offered is not None else list(_OPTION_KINDS)
    for decision in decisions:
        if outcome.option_id == decision:
            return decision
    return "deny"


def tool_call_for_approval(data: ApprovalRequested, *, cwd: str | None = None) -> ToolCallUpdate:
    """The ``toolCall`` of the ``session/request_permission`` that asks ``data``.

    It names the tool call the approval is for (the approval's id when the agent gave no
    tool id). A call the client already knows keeps the content ``tool_call`` gave it unless
    the approval's input yields diffs of its own.
    """
    view = tool_call_view(data.tool, None, data.input, cwd=cwd, title=data.title)
    keep = data.tool_id is not None and not view.has_diff
    return ToolCallUpdate(
        tool_call_id=data.tool_id or data.approval_id,
        title=view.title,
        kind=view.kind,
        status="pending",
        raw_input=data.input,
        content=None if keep or not view.content else list(view.content),
        locations=view.locations or None,
    )


@dataclass(frozen=True, kw_only=True)
class ElicitationForm:
    """What ``elicitation/create`` (mode ``form``) sends for a question."""

    message: str
    requested_schema: ElicitationSchema


def elicitation_form(data: QuestionAsked) -> ElicitationForm:
    """The form that asks ``data``'s questions, one field (or two) per question."""
    single = len(data.questions) == 1
    properties: dict[str, Any] = {}
    required: list[str] = []
    for number, question in enumerate(data.questions):
        name = f"question_{number}"
        description = None if single else question.prompt
        title = question.header
        values = _values(question)
        if not values:
            properties[name] = ElicitationStringPropertySchema(
                type="string", title=title, description=description
            )
        elif question.multi_select:
            properties[name] = ElicitationMultiSelectPropertySchema(
                type="array",
                title=title,
                description=description,
                items=TitledMultiSelectItems(any_of=values),
            )
        else:
            properties[name] = ElicitationStringPropertySchema(
                type="string", title=title, description=description, one_of=values
            )
        if values and question.free_text:
            properties[name + CUSTOM_SUFFIX] = ElicitationStringPropertySchema(
                type="string",
                title="Other",
                description="Your own answer, or a note to the option chosen (optional).",
            )
        elif values or question.free_text:
            required.append(name)
    if single:
        message = data.questions[0].prompt
    else:
        message = f"The agent asks {len(data.questions)} questions."
    schema = ElicitationSchema(type="object", properties=properties, required=required or None)
    return ElicitationForm(message=message, requested_schema=schema)


def answers_from(
    data: QuestionAsked, content: Mapping[str, Any] | None
) -> tuple[QuestionAnswer, ...]:
    """The answers an ``accept``'s ``content`` gives ``data``'s questions, one per question:
    the labels chosen and the user's own words. A field left empty leaves its answer empty;
    the gateway's check of the answers says what is missing."""
    content = content or {}
    answers: list[QuestionAnswer] = []
    for number, question in enumerate(data.questions):
        name = f"question_{number}"
        value = content.get(name)
        own = content.get(name + CUSTOM_SUFFIX)
        selected: list[str] = []
        text: str | None = None
        if _values(question):
            picked = value if isinstance(value, list) else [value]
            selected = list(dict.fromkeys(v for v in picked if isinstance(v, str) and v))
        elif isinstance(value, str):
            own = value
        if isinstance(own, str) and own.strip():
            text = own.strip()
        answers.append(QuestionAnswer(selected=selected, text=text))
    return tuple(answers)


def _values(question: Question) -> list[EnumOption]:
    """The question's offered labels as titled values (each label once)."""
    values: dict[str, EnumOption] = {}
    for option in question.options:
        if option.label not in values:
            values[option.label] = EnumOption(
                const=option.label, title=option.label, description=option.description
            )
    return list(values.values())
