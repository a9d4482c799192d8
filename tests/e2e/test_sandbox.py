"""Each session's agent sees only its own workspace: the sandbox, with the real CLIs.

One gateway per provider, its data directory (configuration file, SQLite database, token file,
every session's home) inside the workspace of session A: every one of the gateway's files lies
under a path A's sandbox shows, so only the sandbox keeps them out of sight. Session B works in
a sibling workspace under the same root and has run a turn (its home exists). In A, an ``ask``
session, the user allows one command that lists the data directory, reads each of the
gateway's files, its ``/proc/<pid>/environ``, B's workspace and home, and a file of A's own
workspace; each read prints a marker with its exit status. The configuration and token
files are read through ``base64``, the issue's ``base64 <gateway config>``.

The same command in a session whose provider runs with ``sandbox = "none"`` sees every one of
them: each probe can tell a leak.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.security import write_token_file
from app.providers.catalog import present_by_default
from tests.e2e.cli_harness import create_session, kinds, run_turn, stored_events
from tests.e2e.providers import CONFIGS
from tests.gateway import GatewayProcess
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

PROVIDERS = ["claude_code", "codex", "opencode", "acp:gemini"]
"""The three CLIs the gateway drives natively and one ACP agent that runs shell commands."""
CANARY_VARIABLE = "SANDBOX_CANARY"
"""Set in the gateway's own environment only: ``/proc/<gateway pid>/environ`` shows it."""
MARK = re.compile(r"<<([a-z-]+):(\d+)>>")
FORBIDDEN = ("config", "database", "token", "environ", "b-workspace", "b-home")
"""Reads that must fail. Listing the data directory succeeds (the sandbox shows an empty
directory there, with its own home's mount point in it) but names none of the gateway's
files."""
"""Reads that must fail. Listing the data directory succeeds inside the workspace (the
sandbox shows an empty directory there, its own home's mount point in it) but lists none of
the gateway's files."""


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One gateway with sessions A and B, and what A must not see."""

    gateway: GatewayProcess
    client: httpx.Client
    a: str
    a_workspace: Path
    b: str
    b_home_made: list[str]
    """What B's own turn left in its home."""
    reads: dict[str, str]
    """Probe name → the shell command that reads it."""
    leaks: dict[str, str]
    """Probe name → a text the event log holds only if the read saw the file."""


@dataclass(frozen=True, kw_only=True)
class Probed:
    events: list[dict[str, Any]]
    """The turn's events, as streamed."""
    log: str
    """A's whole event log, as JSON text."""

    def statuses(self) -> dict[str, set[int]]:
        """Each probe's exit statuses, from its markers wherever the log shows the output."""
        found: dict[str, set[int]] = {}
        for name, status in MARK.findall(self.log):
            found.setdefault(name, set()).add(int(status))
        return found


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def probe_command(reads: dict[str, str]) -> str:
    """One command running every read, each followed by ``<<name:status>>``."""
    return "; ".join(f'{read}; echo " <<{name}:$?>>"' for name, read in reads.items())


def start_gateway(root: Path, stub: StubLLM, provider: str, **section: Any) -> GatewayProcess:
    """A gateway whose data directory (and configuration file in it) lies inside
    ``root/roots/a``, with ``provider`` its only one and a token file beside its database."""
    roots, home = root / "roots", root / "home"
    data_dir = roots / "a" / ".gateway"
    home.mkdir(parents=True)
    write_token_file(data_dir / "token")
    sections: dict[str, Any] = {name: {"enabled": False} for name in present_by_default()}
    sections[provider] = {**CONFIGS[provider](stub, home), **section}
    config = {
        "workspaces": {"roots": [str(roots)]},
        "sessions": {"approval_timeout_s": 120},
        "selection": {"default": provider},
        "providers": sections,
    }
    canary = f"envcanary{secrets.token_hex(8)}"
    gateway = GatewayProcess(data_dir=data_dir, config=config, extra_env={CANARY_VARIABLE: canary})
    return gateway.start()


@pytest.fixture
def setting_for(tmp_path: Path) -> Iterator[Any]:
    """``setting_for(provider, **section)``: a started gateway and its two sessions."""
    opened: list[tuple[GatewayProcess, httpx.Client]] = []
    with StubLLM() as stub:

        def make(provider: str, **section: Any) -> Setting:
            a_workspace, b_workspace = tmp_path / "roots" / "a", tmp_path / "roots" / "b"
            b_workspace.mkdir(parents=True)
            gateway = start_gateway(tmp_path, stub, provider, **section)
            client = gateway.client()
            opened.append((gateway, client))
            a = create_session(client, a_workspace, approval_mode="ask")
            b = create_session(client, b_workspace, approval_mode="ask")
            said = run_turn(client, b, "Say hello")
            assert said[-1]["type"] == "turn.completed", said[-1]
            home = gateway.data_dir / "homes" / b
            made = sorted(p.name for p in home.iterdir()) if home.is_dir() else []
            return arrange(gateway, client, a=a, b=b, a_workspace=a_workspace, b_home_made=made)

        try:
            yield make
        finally:
            for gateway, client in opened:
                client.close()
                gateway.stop()


def arrange(
    gateway: GatewayProcess,
    client: httpx.Client,
    *,
    a: str,
    b: str,
    a_workspace: Path,
    b_home_made: list[str],
) -> Setting:
    """Plant what A must not see (and the file of its own it must), and the reads of each."""
    data_dir = gateway.data_dir
    b_workspace = a_workspace.parent / "b"
    b_home = data_dir / "homes" / b
    (b_workspace / "notes.txt").write_text(f"b-workspace-{secrets.token_hex(8)}\n")
    b_home.mkdir(parents=True, exist_ok=True)  # the operator's view: B's home, with one more file
    planted = f"b-home-{secrets.token_hex(8)}"
    (b_home / planted).write_text("B's own\n")
    (a_workspace / "mine.txt").write_text(f"own-{secrets.token_hex(8)}\n")
    assert gateway.process is not None
    pid = gateway.process.pid
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    canary = next(v for v in environ if v.startswith(f"{CANARY_VARIABLE}=".encode()))
    config, database, token = (data_dir / n for n in ("gateway.toml", "gateway.db", "token"))
    reads = {
        "data-dir": f"ls -A {data_dir} | sed 's/^/listed:/'",
        "config": f"base64 -w0 {config}",
        "database": f"head -c 15 {database}",
        "token": f"base64 -w0 {token}",
        "environ": f"tr '\\0' '\\n' < /proc/{pid}/environ",
        "b-workspace": f"cat {b_workspace / 'notes.txt'}",
        "b-home": f"ls -A {b_home}",
        "own": "cat mine.txt",
    }
    leaks = {
        "data-dir": f"listed:{config.name}",
        # Its opening lines (no secret in them: the mask redacts the keys, base64 too).
        "config": b64(config.read_bytes()[:48]),
        "database": "SQLite format 3",
        "token": b64(token.read_bytes()),
        "environ": canary.decode().partition("=")[2],
        "b-workspace": (b_workspace / "notes.txt").read_text().strip(),
        "b-home": planted,
        "own": (a_workspace / "mine.txt").read_text().strip(),
    }
    return Setting(
        gateway=gateway,
        client=client,
        a=a,
        a_workspace=a_workspace,
        b=b,
        b_home_made=b_home_made,
        reads=reads,
        leaks=leaks,
    )


def probe(setting: Setting) -> Probed:
    """Run the probe command in A, allowing it; A's event log afterwards."""
    prompt = f"[[tool:bash {probe_command(setting.reads)}]]"
    events = run_turn(setting.client, setting.a, prompt, decision="allow")
    log = json.dumps(stored_events(setting.client, setting.a))
    return Probed(events=events, log=log)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_allowed_command_reads_its_own_workspace_and_nothing_of_the_gateway_or_b(
    provider: str, setting_for: Any
) -> None:
    setting: Setting = setting_for(provider)
    probed = probe(setting)

    assert "approval.resolved" in kinds(probed.events)
    assert probed.events[-1]["type"] == "turn.completed", probed.events[-1]
    statuses = probed.statuses()
    assert statuses.get("own") == {0}, probed.log[-4000:]
    assert setting.leaks["own"] in probed.log
    seen = {name for name, leak in setting.leaks.items() if name != "own" and leak in probed.log}
    assert seen == set(), f"{provider}'s agent read {sorted(seen)}"
    read = {name for name in FORBIDDEN if 0 in statuses.get(name, {0})}
    assert read == set(), f"{provider}'s agent could open {sorted(read)}: {statuses}"
    assert setting.b_home_made, "B's turn left nothing in a home of its own"


def test_without_the_sandbox_the_same_command_reads_everything(setting_for: Any) -> None:
    """The companion: with ``sandbox = "none"`` every probe above reports what it read."""
    setting: Setting = setting_for("claude_code", sandbox="none")
    probed = probe(setting)

    assert probed.events[-1]["type"] == "turn.completed", probed.events[-1]
    statuses = probed.statuses()
    assert {name: statuses.get(name) for name in setting.reads} == {
        name: {0} for name in setting.reads
    }
    seen = {name for name, leak in setting.leaks.items() if leak in probed.log}
    assert seen == set(setting.leaks)
