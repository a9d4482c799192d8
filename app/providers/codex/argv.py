"""The ``codex app-server`` command line and a thread's policy: pure functions of the settings.

Configuration reaches Codex only as ``-c key=value`` overrides (reference §2.1): the user's own
``$CODEX_HOME/config.toml`` is read by Codex as usual and never written by the gateway.

Codex's own retry budgets (``request_max_retries``, ``stream_max_retries``) are settings of a
model provider, not top-level keys: codex-cli 0.171.0 (like 0.169.0) rejects
``-c request_max_retries=…`` with ``--strict-config`` ("unknown configuration field") and
refuses ``model_providers.openai.…`` ("Built-in providers cannot be overridden"). So the
gateway's budgets (``retry.cli_request_retries`` / ``retry.cli_stream_retries``) can only
reach a custom provider that ``providers.codex.config`` defines (``model_providers.<id>``) and
selects (``model_provider = "<id>"``); with the built-in OpenAI provider Codex keeps its defaults
(4 HTTP retries, 5 stream reconnects).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, assert_never

from pydantic import JsonValue

from app.events import ApprovalMode

__all__ = [
    "DEFAULT_CONFIG",
    "FORCED_CONFIG",
    "RetryBudget",
    "build_argv",
    "config_overrides",
    "thread_config",
    "thread_policy",
    "toml_value",
]

ApprovalPolicy = Literal["untrusted", "on-request", "never"]
SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]

FORCED_CONFIG: dict[str, JsonValue] = {
    # Without these, every start spends ~5 s reaching the plugin registry and update server,
    # and sends analytics (offline-testing.md). The gateway decides about network use, so
    # they win over the operator's `config` too.
    "check_for_update_on_startup": False,
    "features.plugins": False,
    "analytics.enabled": False,
}


DEFAULT_CONFIG: dict[str, JsonValue] = {
    # codex-cli 0.169.0 does not offer its `update_plan` tool unless told to; its calls are
    # what app-server reports as `turn/plan/updated`, the session's `plan.updated`. An
    # operator's `config` may turn it off again.
    "tools.update_plan.enabled": True,
}


@dataclass(frozen=True)
class RetryBudget:
    """Codex's own retries for one model request, set on the selected custom provider."""

    request_max_retries: int
    stream_max_retries: int


def thread_policy(mode: ApprovalMode) -> tuple[ApprovalPolicy, SandboxMode]:
    """Return the ``approvalPolicy`` and ``sandbox`` of ``thread/start`` for an approval mode.

    Observed with codex-cli 0.169.0 app-server and a stub model calling ``exec_command``
    (``touch x``, ``ls``) and ``apply_patch`` in the workspace:

    - ``untrusted``, any sandbox: every command asks, even ``ls``; an accepted command runs
      outside the sandbox (``touch /var/tmp/x`` under read-only worked); patches ask.
    - ``on-request`` + ``workspace-write``: commands and patches run without asking.
    - ``on-request`` + ``read-only``: commands run unasked and the sandbox refuses writes;
      patches ask.
    - ``never`` + ``read-only``: nothing asks; the sandbox refuses writes, patches are refused.
    - ``never`` + ``danger-full-access``: everything runs unasked.

    ``untrusted`` is refused in config.toml and by ``-a`` in 0.169.0, but ``thread/start``
    accepts it, and it is the only policy that asks before running a command.
    """
    match mode:
        case "ask":
            # Every command and edit asks; the read-only sandbox is what the model is told,
            # and true of anything that would ever run unasked.
            return "untrusted", "read-only"
        case "auto_edits":
            # Codex has no "edits free, commands ask" policy: this one asks for both, and the
            # session accepts edits inside the workspace itself (approvals.auto_accepts).
            # (on-request + workspace-write would run every command unasked.)
            return "untrusted", "workspace-write"
        case "allow_all":
            return "never", "danger-full-access"
        case "read_only":
            # Never asks; the sandbox refuses writes and the agent keeps working with reads.
            # Not untrusted + read-only: an accepted command would run unsandboxed.
            return "never", "read-only"
        case _:
            assert_never(mode)


def thread_config(workspace: Path, *, project_config: bool = False) -> dict[str, JsonValue]:
    """Per-thread config overrides (``thread/start`` and ``thread/resume`` ``config``).

    A workspace is untrusted input (threat model T7). Codex loads a project's
    ``.codex/config.toml``, ``hooks.json`` and ``rules/*.rules`` only when the user's config
    marks the project trusted (``projects."<dir>".trust_level``), looking the trust up by each
    project layer's directory first, then the project and repository roots — all the
    workspace or its ancestors. Observed with codex-cli 0.169.0 and an operator config that
    trusts the workspace: the project's MCP servers started, and a project rule
    ``prefix_rule(pattern=["touch"], decision="allow")`` ran ``touch`` without asking even
    under ``untrusted``. Marking the workspace and every ancestor untrusted for this thread
    (thread config outranks the user's file and decides the trust lookup) disables those
    layers whatever the user trusted elsewhere; the user's file is not touched.

    With ``project_config`` (``providers.codex.project_config``) the same paths are marked
    trusted instead, for this thread only: the project's layers load as if the operator had
    trusted the workspace in Codex itself.
    """
    level: dict[str, JsonValue] = {"trust_level": "trusted" if project_config else "untrusted"}
    projects: dict[str, JsonValue] = {
        str(path): dict(level) for path in (workspace, *workspace.parents)
    }
    return {"projects": projects}


def toml_value(value: JsonValue, *, key: str = "value") -> str:
    """Encode ``value`` as a TOML literal (inline tables and arrays for containers).

    Raises ``ValueError`` naming ``key`` for what TOML cannot hold: ``null`` and non-finite
    numbers.
    """
    if value is None:
        raise ValueError(f"{key}: TOML has no null; remove the key instead")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{key}: {value} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        items = (toml_value(item, key=f"{key}[{i}]") for i, item in enumerate(value))
        return "[" + ", ".join(items) + "]"
    pairs = (f"{_toml_key(k)} = {toml_value(v, key=f'{key}.{k}')}" for k, v in value.items())
    return "{" + ", ".join(pairs) + "}"


def config_overrides(
    config: Mapping[str, JsonValue], *, retry: RetryBudget | None = None
) -> list[tuple[str, str]]:
    """Flatten ``config`` to ``(dotted key, TOML value)`` pairs, ending with ``FORCED_CONFIG``.

    ``DEFAULT_CONFIG`` keys the operator did not set are added.

    Nested tables become dotted keys (``{"a": {"b": 1}}`` → ``a.b``) so that each override
    sets one value and leaves its siblings in the user's config alone; a key may itself be
    dotted already. An empty table is passed as ``{}``. Operator keys that ``FORCED_CONFIG``
    sets are dropped.

    With ``retry``, when ``config`` selects (``model_provider``) a provider it also defines
    (``model_providers.<id>``), that provider's ``request_max_retries`` and
    ``stream_max_retries`` are added unless the operator set them.
    """
    flat: dict[str, str] = {}
    _flatten(config, "", flat)
    provider = config.get("model_provider")
    if retry is not None and isinstance(provider, str) and provider:
        prefix = f"model_providers.{provider}."
        if any(key.startswith(prefix) for key in flat):
            flat.setdefault(f"{prefix}request_max_retries", str(retry.request_max_retries))
            flat.setdefault(f"{prefix}stream_max_retries", str(retry.stream_max_retries))
    for key, value in DEFAULT_CONFIG.items():
        flat.setdefault(key, toml_value(value, key=key))
    for key in FORCED_CONFIG:
        flat.pop(key, None)
    for key, value in FORCED_CONFIG.items():
        flat[key] = toml_value(value, key=key)
    return list(flat.items())


def build_argv(
    *,
    executable: str,
    config: Mapping[str, JsonValue],
    extra_args: Sequence[str] = (),
    retry: RetryBudget | None = None,
) -> list[str]:
    """Return the argv that starts one shared ``codex app-server`` speaking JSON-RPC on stdio.

    ``extra_args`` come last, the operator's escape hatch for flags this builder does not know.
    ``retry`` is passed on to ``config_overrides``.
    """
    argv = [executable, "app-server", "--listen", "stdio://"]
    for key, value in config_overrides(config, retry=retry):
        argv += ["-c", f"{key}={value}"]
    argv.extend(extra_args)
    return argv


def _flatten(table: Mapping[str, JsonValue], prefix: str, out: dict[str, str]) -> None:
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            _flatten(value, f"{path}.", out)
        else:
            out[path] = toml_value(value, key=path)


def _toml_key(key: str) -> str:
    if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key):
        return key
    return _toml_string(key)


# TOML basic strings must escape '"', '\\' and every control character but tab (TOML 1.0
# "String"); JSON's escaping differs (it leaves U+007F raw and writes surrogate pairs).
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_string(text: str) -> str:
    out = []
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif (ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            raise ValueError(f"{text!r}: a lone surrogate cannot be written as TOML")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
