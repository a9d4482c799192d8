"""The Python SDK (clients/python) kept in step with the API it speaks: its version is the
API's, every schema of docs/openapi.json has its model (every property a field, every enum
the same ``Literal``), every request body its keyword parameters, every operation its
method; and the package builds as a wheel of its own."""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
import tomllib
import types
import zipfile
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import agent_gateway_sdk
import pytest
from agent_gateway_sdk import (
    AsyncClient,
    AsyncSession,
    Client,
    Session,
    aio,
    client,
    errors,
    events,
    models,
)
from agent_gateway_sdk import _aio_resources as aio_resources
from agent_gateway_sdk import _resources as resources
from pydantic import BaseModel

from app import __version__ as gateway_version
from tests.gateway import ROOT

SDK = ROOT / "clients" / "python"
DOCUMENT = json.loads((ROOT / "docs" / "openapi.json").read_text())
SCHEMAS: dict[str, dict[str, Any]] = DOCUMENT["components"]["schemas"]

RECORDS: dict[str, type[BaseModel]] = {
    "ApprovalOption": models.ApprovalOption,
    "ApprovalPublic": models.Approval,
    "BudgetAmounts": models.BudgetAmounts,
    "SessionBudgetPublic": models.SessionBudget,
    "KeyBudgetPublic": models.KeyBudget,
    "CandidateScore": models.CandidateScore,
    "CapabilitiesPublic": models.Capabilities,
    "ChangedFile": models.ChangedFile,
    "ChangesPublic": models.Changes,
    "FiguresPublic": models.Figures,
    "HealthPublic": models.Health,
    "InterruptAccepted": models.InterruptAccepted,
    "LimitEnforcement": models.LimitEnforcement,
    "ProcessPublic": models.ProcessInfo,
    "ProviderPublic": models.Provider,
    "ProviderSwitch": models.ProviderSwitch,
    "Question": models.Question,
    "QuestionAnswer": models.Answer,
    "QuestionAnswerIn": models.Answer,
    "QuestionOption": models.QuestionOption,
    "QuestionPublic": models.QuestionRequest,
    "Readiness": models.Readiness,
    "RetryPolicyIn": models.RetryPolicy,
    "RetryPolicyPublic": models.RetryPolicyInfo,
    "RevertPublic": models.Revert,
    "RunResult": models.RunResult,
    "SandboxPublic": models.SandboxInfo,
    "Selection": models.Selection,
    "SessionPublic": models.SessionInfo,
    "SkippedCandidate": models.SkippedCandidate,
    "SkippedProvider": models.SkippedCandidate,
    "TurnError": models.TurnError,
    "TurnPublic": models.Turn,
    "Usage": models.Usage,
    "UsageGroupPublic": models.UsageGroup,
    "UsageReport": models.UsageReport,
    "UsageTotalsPublic": models.UsageTotals,
    "EventPage": events.EventPage,
    **{name: getattr(events, name) for name in SCHEMAS if hasattr(events, name)},
}
"""Each response schema and the SDK model that reads it (event data and envelopes keep the
document's names)."""

LISTS = {
    "ApprovalList": "approvals",
    "ProviderList": "providers",
    "QuestionList": "questions",
    "SessionList": "sessions",
    "TurnList": "turns",
}
"""List answers the SDK returns as plain lists (the one member named)."""

BODIES: dict[str, list[str]] = {
    "SessionCreate": ["sessions.create"],
    "TurnCreate": ["session.turns.start"],
    "ApprovalRespond": ["session.approvals.respond"],
    "QuestionReply": ["session.questions.answer"],
    "RevertCreate": ["session.revert"],
    "SessionForkCreate": ["session.fork"],
    "RunCreate": ["runs.create", "runs.stream"],
    "SessionConfigure": ["session.configure"],
}
"""Each request body and the SDK methods whose keyword parameters are its properties."""

OTHERS = {
    "JsonValue": "any JSON value (``Any`` in the models)",
    "Problem": "errors.ApiError's attributes",
    "ValidationProblem": "errors.ApiError's attributes (``errors``)",
    "FieldProblem": "the items of errors.ApiError.errors",
    "Liveness": "Client.alive()",
    "BudgetIn": "the ``budget`` keyword of sessions.create and runs.create (a dict)",
    **{
        name: "the webhooks' admin API, for operators, not client programs (docs: Webhooks)"
        for name in SCHEMAS
        if name.startswith("Webhook")
    },
}

METHODS: dict[str, str] = {
    "healthz": "alive",
    "readyz": "ready",
    "getUsage": "usage",
    "listProviders": "providers.list",
    "getProvider": "providers.get",
    "createRun": "runs.create",
    "listSessions": "sessions.list",
    "createSession": "sessions.create",
    "getSession": "sessions.get",
    "deleteSession": "sessions.delete",
    "listApprovals": "session.approvals.list",
    "respondApproval": "session.approvals.respond",
    "getChanges": "session.changes",
    "getEvents": "session.events session.events_page",
    "forkSession": "session.fork",
    "interruptTurn": "session.interrupt",
    "listQuestions": "session.questions.list",
    "answerQuestion": "session.questions.answer",
    "revertSession": "session.revert",
    "listTurns": "session.turns.list",
    "createTurn": "session.turns.start",
    "configureSession": "session.configure",
    "getTurn": "session.turns.get",
}
"""Each operation and the methods that call it (``session.`` on a ``Session``; together they
take every parameter)."""
LEFT_OUT = {
    "getMetrics": "Prometheus text for a scraper, not for a program",
    **{
        operation: "the webhooks' admin API, for operators, not client programs"
        for operation in (
            "listWebhooks",
            "createWebhook",
            "getWebhook",
            "listWebhookDeliveries",
            "disableWebhook",
            "enableWebhook",
            "rotateWebhookSecret",
            "testWebhook",
        )
    },
}
PARAMETER_NAMES = {
    "from": "from_",
    "Last-Event-ID": "after",
    "format": None,
    "Idempotency-Key": "idempotency_key",
}
"""Query parameters the SDK spells otherwise (``format=patch`` is ``Session.patch()``)."""


def _resolve(path: str, *, asynchronous: bool) -> Any:
    """``session.turns.start`` → the function on the (async) class."""
    client_module = aio if asynchronous else client
    resource_module = aio_resources if asynchronous else resources
    prefix = "Async" if asynchronous else ""
    classes = {
        "sessions": getattr(client_module, f"{prefix}Sessions"),
        "session": AsyncSession if asynchronous else Session,
        "turns": getattr(resource_module, f"{prefix}Turns"),
        "approvals": getattr(resource_module, f"{prefix}Approvals"),
        "questions": getattr(resource_module, f"{prefix}Questions"),
        "runs": getattr(resource_module, f"{prefix}Runs"),
        "providers": getattr(resource_module, f"{prefix}Providers"),
    }
    *owners, name = path.split(".")
    owner = classes[owners[-1]] if owners else (AsyncClient if asynchronous else Client)
    return getattr(owner, name)


def _literal_values(annotation: Any) -> set[str] | None:
    """The values of a ``Literal`` annotation (inside ``X | None`` too), else ``None``."""
    if get_origin(annotation) is Literal:
        return set(get_args(annotation))
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _literal_values(arg)
            if found is not None:
                return found
    return None


def _schema_enum(prop: dict[str, Any]) -> set[str] | None:
    if "enum" in prop:
        return set(prop["enum"])
    if "const" in prop:
        return {prop["const"]}
    for option in prop.get("anyOf", []):
        found = _schema_enum(option)
        if found is not None:
            return found
    return None


def test_the_sdk_version_is_the_api_version() -> None:
    project = tomllib.loads((SDK / "pyproject.toml").read_text())["project"]
    assert project["dynamic"] == ["version"]
    assert agent_gateway_sdk.__version__ == DOCUMENT["info"]["version"] == gateway_version
    assert agent_gateway_sdk.__version__ == agent_gateway_sdk.API_VERSION


def test_the_sdk_depends_on_httpx_and_pydantic_only() -> None:
    project = tomllib.loads((SDK / "pyproject.toml").read_text())["project"]
    assert sorted(d.split(">")[0] for d in project["dependencies"]) == ["httpx", "pydantic"]
    assert project["requires-python"] == ">=3.11"


def test_every_schema_of_the_document_is_known_to_the_sdk() -> None:
    known = set(RECORDS) | set(LISTS) | set(BODIES) | set(OTHERS)
    assert sorted(set(SCHEMAS) - known) == [], "a schema the SDK does not know: add its model"


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_property_of_a_response_schema_is_a_field_with_the_same_enum(name: str) -> None:
    schema = SCHEMAS[name]
    model = RECORDS[name]
    fields = {(f.alias or key): f for key, f in model.model_fields.items()}
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    assert sorted(set(properties) - set(fields)) == [], f"{model.__name__} lacks them"
    required = set(schema.get("required", []))
    for key, field in fields.items():
        if field.is_required():
            assert key in required, f"{model.__name__}.{key} is required, the schema's is not"
        if key not in properties:
            continue
        expected = _schema_enum(properties[key])
        if expected is not None:
            assert _literal_values(field.annotation) == expected, f"{model.__name__}.{key}"


def test_the_event_union_is_the_documents() -> None:
    union = SCHEMAS["EventPage"]["properties"]["events"]["items"]["discriminator"]["mapping"]
    assert set(union) == events.EVENT_TYPES
    for kind, ref in union.items():
        cls = getattr(events, ref.rsplit("/", 1)[1])
        assert cls.model_fields["type"].annotation == Literal[kind]


@pytest.mark.parametrize("name", sorted(LISTS))
def test_a_list_answer_is_one_member(name: str) -> None:
    assert set(SCHEMAS[name]["properties"]) == {LISTS[name]}


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_every_property_of_a_request_body_is_a_keyword_parameter(
    name: str, asynchronous: bool
) -> None:
    properties = set(SCHEMAS[name]["properties"])
    for path in BODIES[name]:
        function = _resolve(path, asynchronous=asynchronous)
        parameters = set(inspect.signature(function).parameters) - {"self"}
        assert sorted(properties - parameters) == [], f"{path} lacks them"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_every_operation_has_a_method_taking_its_parameters(asynchronous: bool) -> None:
    operations = {
        op["operationId"]: op for item in DOCUMENT["paths"].values() for op in item.values()
    }
    assert sorted(set(operations) - set(METHODS) - set(LEFT_OUT)) == []
    for operation_id, paths in METHODS.items():
        functions = {p: _resolve(p, asynchronous=asynchronous) for p in paths.split()}
        parameters = {n for f in functions.values() for n in inspect.signature(f).parameters}
        for parameter in operations[operation_id].get("parameters", []):
            if parameter["in"] == "path":
                continue
            wanted = PARAMETER_NAMES.get(parameter["name"], parameter["name"])
            if wanted is not None:
                assert wanted in parameters, f"{paths} lack {parameter['name']}"
        for path, function in functions.items():
            expected = asynchronous and path != "session.events"  # a stream, not a coroutine
            assert inspect.iscoroutinefunction(function) == expected, path


def test_an_error_carries_every_member_of_a_problem() -> None:
    error = errors.error_for(
        422,
        json.dumps(
            {
                "type": "urn:agent-gateway:problem:validation_failed",
                "title": "Invalid request",
                "status": 422,
                "detail": "body.workspace: must be absolute",
                "errors": [{"location": "body.workspace", "message": "must be absolute"}],
            }
        ).encode(),
        {"retry-after": "3"},
    )
    assert isinstance(error, errors.UnprocessableEntity)
    members = set(SCHEMAS["ValidationProblem"]["properties"]) | set(
        SCHEMAS["Problem"]["properties"]
    )
    assert all(hasattr(error, m) for m in members)
    assert error.code == "validation_failed"
    assert error.errors[0]["location"] == "body.workspace"
    assert error.retry_after == 3.0
    plain = errors.error_for(502, b"<html>bad gateway</html>", {})
    assert isinstance(plain, errors.ServerError)
    assert plain.detail == "<html>bad gateway</html>"


def test_the_package_builds_a_wheel_of_its_own(tmp_path: Path) -> None:
    # A copy: setuptools leaves build/ and *.egg-info beside the sources it builds.
    source = tmp_path / "source"
    shutil.copytree(
        SDK, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("agent_gateway_sdk-*.whl")
    assert wheel.name.startswith(f"agent_gateway_sdk-{agent_gateway_sdk.__version__}-py3")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(n for n in names if n.endswith("METADATA"))
        text = archive.read(metadata).decode()
    assert "agent_gateway_sdk/py.typed" in names
    assert "agent_gateway_sdk/client.py" in names
    assert not any(n.startswith("tests/") for n in names)
    requires = sorted(line for line in text.splitlines() if line.startswith("Requires-Dist"))
    assert requires == ["Requires-Dist: httpx>=0.27", "Requires-Dist: pydantic>=2.7"]
