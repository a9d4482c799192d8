"""The agent CLIs as processes under a running gateway (with the fake ``claude``): gateways on
a database migrated once, with the small limits every limit test needs; what ``/proc`` says
about the CLIs and their children; turns followed to their end.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.gateway import FakeGateway, fake_gateway_at
from tests.gateway import TOKEN, follow, is_turn_end
from tests.gateway import wait_until as poll_until

MIB = 1024 * 1024
NO_RETRY = {"enabled": False}
WATCH = {"watch_interval_s": 0.2}
SHARED_LIMITS = {
    **WATCH,
    "max_line_bytes": MIB,
    "max_turn_output_bytes": 32 * MIB,
    "max_process_rss_bytes": 256 * MIB,
    "max_process_count": 20,
    # Every test of the module creates its sessions on the shared gateway within a minute.
    "session_creates_per_minute": 10_000,
}


class PremigratedGateway(FakeGateway):
    """Starts on a copy of a database the real ``migrate`` command made once for the module,
    instead of running that command again (about a second a start); a database already in
    its data directory (a restart) is at the head revision and is left as it is."""

    template: Path

    def migrate(self) -> None:
        database = self.data_dir / "gateway.db"
        if not database.exists():
            shutil.copyfile(self.template, database)


def fake_gateway_in(directory: Path, template: Path, **overrides: Any) -> FakeGateway:
    """A gateway in ``directory`` whose ``claude`` is the fake, on a pre-migrated database
    (unsandboxed, as every fake gateway: tests/fakes/gateway.py)."""
    gateway = fake_gateway_at(directory, PremigratedGateway, **overrides)
    assert isinstance(gateway, PremigratedGateway)
    gateway.template = template
    return gateway


def gateway_secrets(gateway: FakeGateway) -> dict[str, str]:
    """Secrets of the gateway's own that its environment holds (none may reach a CLI)."""
    return {
        "GATEWAY_SERVER__TOKEN": TOKEN,
        "GATEWAY_STORAGE__URL": f"sqlite+aiosqlite:///{gateway.data_dir / 'gateway.db'}",
        "DATABASE_URL": "postgresql://user:db-password@db/gateway",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "AWS_SESSION_TOKEN": "aws-session-value",
        "GITHUB_TOKEN": "ghp_githubtokenvalue",
        "OPENAI_API_KEY": "sk-openai-value",
        "PGPASSWORD": "pg-password-value",
    }


wait_until = partial(poll_until, timeout=15.0)


def stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Running (a zombie counts as gone)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def descendants(root: int) -> dict[int, str]:
    """Every process below ``root`` by parent pid, with its state (``Z`` for zombies)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat_fields(int(entry.name))) is not None:
            table[int(entry.name)] = (int(fields[1]), fields[0])
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        parent = stack.pop()
        for pid, (ppid, state) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = state
                stack.append(pid)
    return found


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        fields = stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def sleeping_children(cli: int) -> list[int]:
    """The members of the CLI's process group that run ``sleep 1000`` (its ``fork:N``)."""
    found = []
    for pid in group_members(cli):
        try:
            if pid != cli and Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x001000\x00":
                found.append(pid)
        except OSError:
            continue
    return found


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def run_turn(
    client: httpx.Client, session_id: str, prompt: str, **body: Any
) -> list[dict[str, Any]]:
    """Start a turn and return its events up to and including the terminal one."""
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt, **body})
    assert response.status_code == 202, response.text
    return follow(client, session_id, after=after)


def terminal(events: list[dict[str, Any]]) -> dict[str, Any]:
    ends = [e for e in events if is_turn_end(e)]
    assert len(ends) == 1, [e["type"] for e in events]
    assert ends[0] is events[-1]
    return ends[0]


def gateway_pid(gateway: FakeGateway) -> int:
    assert gateway.process is not None
    return gateway.process.pid


def prompts(gateway: FakeGateway) -> list[dict[str, Any]]:
    path = Path(f"{gateway.spawn_log}.prompts")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def cli_pids(gateway: FakeGateway, client: httpx.Client, session_id: str) -> list[int]:
    """The CLI processes that took the session's prompts (by its thread), oldest first."""
    thread = client.get(f"/v1/sessions/{session_id}").json()["thread_id"]
    assert thread, "the session has no thread yet"
    return list(dict.fromkeys(e["pid"] for e in prompts(gateway) if e["thread"] == thread))


def grandchildren(gateway: FakeGateway) -> list[int]:
    path = Path(f"{gateway.spawn_log}.grandchildren")
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def close_sessions(gateway: FakeGateway, session_ids: list[str]) -> None:
    """Delete sessions (stopping their CLIs) so that they take nothing from later tests."""

    def close(session_id: str) -> None:
        with gateway.client() as own:
            assert own.delete(f"/v1/sessions/{session_id}").status_code == 200

    with ThreadPoolExecutor(10) as pool:
        list(pool.map(close, session_ids))
