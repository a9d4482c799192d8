"""Test harness: the real gateway as a child process (``python -m app serve``) on loopback.

``GatewayProcess`` writes a TOML config, starts the server (which migrates its database) on a
free port and waits for ``/healthz``; ``stop()`` sends SIGTERM and waits. The same data
directory can be started again to prove what survives a restart. ``SseReader`` parses a real
SSE stream.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "test-token-0123456789abcdefghijklmnopqrstuvwxyz"
CLUSTER_SECRET = "test-cluster-secret-0123456789abcdefghijklmnop"
"""``cluster.secret`` of the replicas the tests start (every replica of one cluster shares it)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    raise TypeError(value)


def _toml_key(key: str) -> str:
    """A bare key where TOML allows one, else a quoted one (``"acp:gemini"``)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def to_toml(config: Mapping[str, Any], prefix: str = "") -> str:
    """A small TOML writer for nested dicts of scalars, lists and inline tables."""
    scalars = {k: v for k, v in config.items() if not isinstance(v, dict) or k == "env"}
    tables = {k: v for k, v in config.items() if isinstance(v, dict) and k != "env"}
    lines = [f"[{prefix}]"] if prefix and scalars else []
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items()]
    for key, value in tables.items():
        lines.append(to_toml(value, f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)))
    return "\n".join(lines) + "\n"


@dataclass
class GatewayProcess:
    data_dir: Path
    config: dict[str, Any]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    config_name: str = "gateway.toml"
    umask: int = -1
    """The umask ``serve`` starts with (-1: this process's)."""
    """The configuration file written into ``data_dir`` (two gateways sharing one need two)."""
    entry: tuple[str, ...] = ("-m", "app")
    """What the interpreter runs, given ``serve`` (a ``-c`` wrapper that also reports on the
    process, say)."""
    _log_file: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        config = json.loads(json.dumps(self.config))
        server = config.setdefault("server", {})
        server.update({"host": "127.0.0.1", "port": self.port, "token": TOKEN})
        # CI and the development machines run as root; the gateway refuses root by default.
        server.setdefault("allow_root", os.geteuid() == 0)
        config.setdefault("storage", {}).setdefault("data_dir", str(self.data_dir))
        path = self.data_dir / self.config_name
        path.write_text(to_toml(config))
        return path

    def _env(self) -> dict[str, str]:
        # Neither the developer's settings nor their collector (OTEL_*): a test gateway sends
        # nothing past loopback, and traces only when its test asks.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OTEL_"))}
        env["GATEWAY_CONFIG"] = str(self._write_config())
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.extra_env)
        return env

    def command(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``agent-gateway <args>`` with this gateway's configuration; it must end."""
        return subprocess.run(
            [sys.executable, "-m", "app", *args],
            cwd=ROOT,
            env=self._env(),
            check=check,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def migrate(self) -> None:
        self.command("migrate")

    def start(self, timeout: float = 30.0) -> Self:
        """Serve (which creates or upgrades the database itself) and wait for ``/healthz``."""
        return self.launch().wait_ready(timeout)

    def launch(self) -> Self:
        """Start ``serve`` without waiting for it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.data_dir / f"gateway-{time.time_ns()}.log"
        self._log_file = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, *self.entry, "serve"],
            cwd=ROOT,
            env=self._env(),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            umask=self.umask,
        )
        return self

    def wait_ready(self, timeout: float = 30.0) -> Self:
        """Wait until the launched server answers ``/healthz``; its log in the error if not."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"gateway exited early:\n{self.log()}")
            try:
                if httpx.get(self.base_url + "/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # polling a port that is not open yet; bounded by the deadline
        raise RuntimeError(f"gateway did not answer /healthz in {timeout} s:\n{self.log()}")

    def stop(self, timeout: float = 30.0) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(timeout=10)
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def client(self, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30.0, **kwargs)


@dataclass
class SseEvent:
    id: str | None
    event: str | None
    data: str

    def json(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.data)
        return value


class SseReader:
    """Reads SSE messages off an open httpx streaming response."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()
        self.comments: list[str] = []

    def __iter__(self) -> Iterator[SseEvent]:
        return self

    def __next__(self) -> SseEvent:
        event_id: str | None = None
        event: str | None = None
        data: list[str] = []
        for line in self._lines:
            if line == "":
                if data:
                    return SseEvent(id=event_id, event=event, data="\n".join(data))
                continue
            if line.startswith(":"):
                self.comments.append(line)
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            elif name == "id":
                event_id = value
            elif name == "event":
                event = value
        raise StopIteration

    def until(self, predicate: Any, limit: int = 10_000) -> list[dict[str, Any]]:
        """Collect envelopes up to and including the first one ``predicate`` accepts."""
        seen: list[dict[str, Any]] = []
        for message in self:
            envelope = message.json()
            assert message.id == str(envelope["seq"])
            seen.append(envelope)
            if predicate(envelope) or len(seen) >= limit:
                return seen
        raise AssertionError(
            f"stream ended before the expected event; got {[e['type'] for e in seen]}"
        )


def migrate_at_once(env: dict[str, str], processes: int = 3) -> list[str]:
    """Run ``agent-gateway migrate`` in ``processes`` processes started together (with
    ``env``); each must succeed. Returns what each printed."""
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "app", "migrate"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    outputs = [process.communicate(timeout=120) for process in started]
    assert [process.returncode for process in started] == [0] * processes, outputs
    return [out for out, _ in outputs]


def wait_until(condition: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout``.

    For state outside the test's reach (the store, a pid, a file): the poll interval is
    bounded by the deadline, it does not make a race pass.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout} s: {what or condition}")


def is_turn_end(envelope: dict[str, Any]) -> bool:
    return envelope["type"] in {"turn.completed", "turn.failed", "turn.interrupted"}


def follow(
    client: httpx.Client, session_id: str, predicate: Any = is_turn_end, *, after: int = 0
) -> list[dict[str, Any]]:
    """Events from ``after`` up to the first one ``predicate`` accepts, read off SSE."""
    headers = {"Accept": "text/event-stream", "Last-Event-ID": str(after)}
    with client.stream("GET", f"/v1/sessions/{session_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        return SseReader(response).until(predicate)


def scrape(client: httpx.Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """``GET /metrics`` as ``{(sample name, labels): value}``."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def metric(
    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    """One sample's value; 0 when the series does not exist yet."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def log_lines(gateway: GatewayProcess) -> list[dict[str, Any]]:
    """The gateway's JSON log lines, parsed (``log_format = "json"``)."""
    return [json.loads(line) for line in gateway.log().splitlines() if line.startswith("{")]
