"""``doctor``'s answer: a table for people, or one JSON document for scripts (``--json``)."""

from __future__ import annotations

import json

from pydantic import JsonValue

from app import __version__
from app.doctor import SAID, Report
from app.doctor.agents import AgentReport
from app.doctor.checks import Check

FORMAT = 1
"""The version of the JSON document: raised when a field changes meaning or goes away (fields
are only added within one version)."""


def render(report: Report) -> str:
    """A plain-text table, one line a check, then the verdict."""
    essential = set(report.essential)
    rows = [("provider", "check", "status", "detail")]
    for check in report.checks:
        label = check.provider + (" *" if check.provider in essential else "")
        rows.append((label, check.name, check.status, check.detail))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        for row in rows
    ]
    lines.append("* the default provider or a fallback: the gateway needs it")
    problems = report.problems
    if problems:
        lines.append("")
        lines.extend(f"not ready: {problem}" for problem in problems)
    else:
        default = next(a for a in report.agents if a.name == report.default)
        lines.append("")
        lines.append(f"ready: {default.name} (the default provider) {SAID[default.status]}")
    return "\n".join(lines)


def as_json(report: Report) -> str:
    """``document`` as ``doctor --json`` prints it."""
    return json.dumps(document(report), indent=2)


def document(report: Report) -> dict[str, JsonValue]:
    """The JSON of ``doctor --json``: stable field names, lower-case statuses."""
    essential = set(report.essential)
    return {
        "format": FORMAT,
        "gateway_version": __version__,
        "exit_code": report.exit_code,
        "ready": report.exit_code == 0,
        "default_provider": report.default,
        "fallback_chain": list(report.fallback_chain),
        "problems": list(report.problems),
        "gateway": [_check(c) for c in report.gateway],
        "providers": {a.name: _agent(a, essential=a.name in essential) for a in report.agents},
    }


def _agent(agent: AgentReport, *, essential: bool) -> dict[str, JsonValue]:
    credential = agent.credential
    return {
        "enabled": agent.enabled,
        "essential": essential,
        "status": agent.status,
        "executable": agent.executable,
        "installed_version": agent.installed_version,
        "pinned_version": agent.pinned_version,
        "credential": None
        if credential is None
        else {
            "found": credential.found,
            "checked": credential.checked,
            "form": credential.form,
            "where": credential.where,
            "fix": credential.fix,
        },
        "checks": [_check(c) for c in agent.checks],
    }


def _check(check: Check) -> dict[str, JsonValue]:
    return {"check": check.name, "status": check.status.lower(), "detail": check.detail}
