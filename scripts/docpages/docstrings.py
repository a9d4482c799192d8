"""Reading the documentation the code carries: attribute docstrings and class docstrings,
turned into Markdown."""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import textwrap


def attribute_docs(cls: type) -> dict[str, str]:
    """The docstring written under each annotated attribute of ``cls`` and of its own bases
    (a subclass's wins), as pydantic models and dataclasses carry them."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.split(".")[0] in ("builtins", "pydantic", "pydantic_settings"):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        definition = ast.parse(source).body[0]
        if not isinstance(definition, ast.ClassDef):
            continue
        body = definition.body
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def class_doc(cls: type) -> str:
    """The class's own docstring (not a base's), or ``""``."""
    doc = cls.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def markdown(text: str) -> str:
    """A docstring as Markdown on one line: reStructuredText literals become code spans,
    and the line breaks of the source go."""
    text = text.replace("``", "`")
    return re.sub(r"\s+", " ", text).strip()


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return markdown(text).replace("|", "\\|")
