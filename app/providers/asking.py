"""The questions an agent asks, read off the shape Claude Code and OpenCode share (pure).

Both CLIs ask ``[{question, header, options: [{label, description}], …}]``; they differ only in
how a question says it takes several labels and whether the user may type an answer of their
own, which the caller reads (``multi_select``, ``free_text``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.events import Question, QuestionOption
from app.providers.raw import as_dict, as_list, as_str


def read_questions(
    entries: object,
    *,
    multi_select: Callable[[dict[str, Any]], bool],
    free_text: Callable[[dict[str, Any]], bool],
) -> list[Question] | None:
    """The questions of ``entries``; None when one has no text (nothing the gateway can
    show), an empty list when there are none."""
    questions: list[Question] = []
    for raw in as_list(entries):
        entry = as_dict(raw)
        prompt = as_str(entry.get("question"))
        if not prompt:
            return None
        options = [
            QuestionOption(label=label, description=as_str(as_dict(o).get("description")))
            for o in as_list(entry.get("options"))
            if (label := as_str(as_dict(o).get("label")))
        ]
        questions.append(
            Question(
                prompt=prompt,
                header=as_str(entry.get("header")),
                options=options,
                multi_select=multi_select(entry),
                free_text=free_text(entry),
            )
        )
    return questions
