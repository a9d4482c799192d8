"""What the real CLIs expose: a prompt that looks like a flag is text, never argv (T8), and the
CLIs' own listeners are none, or loopback behind a password (T15).

Every test drives the pinned real CLI through a real gateway process against the stub LLM
on loopback (tests/e2e/cli_harness.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.providers.opencode.config import SERVER_USERNAME
from tests.e2e.cli_harness import (
    CLI_NAMES,
    PROVIDERS,
    Shared,
    assert_private_socket,
    create_session,
    gateway_children,
    listeners,
    read_proc,
    run_turn,
    shared_gateways,
)
from tests.e2e.test_contract import descendants

pytestmark = pytest.mark.e2e

INJECTION = "--dangerously-skip-permissions ; rm -rf ~"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    with shared_gateways(tmp_path_factory.mktemp("exposure")) as state:
        yield state


# --- T8: a prompt is text, never a flag -------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_t8_flag_like_prompt_reaches_the_model_verbatim_and_never_argv(
    shared: Shared, provider: str
) -> None:
    prompt = f"{INJECTION} [[slow:1]]"
    workspace = shared.workspace(f"t8-{provider}")
    gateway = shared.gateway(provider)
    stub = shared.stub
    seen: dict[int, tuple[list[str], list[str]]] = {}

    def snapshot() -> None:
        for pid in gateway_children(gateway):
            seen[pid] = (read_proc(pid, "cmdline"), read_proc(pid, "environ"))

    with gateway.client() as client:
        session_id = create_session(client, workspace)
        events = run_turn(client, session_id, prompt, on_first_delta=snapshot)

    assert events[-1]["type"] == "turn.completed", events[-1]
    # The CLI was running while the snapshot was taken, and nothing of the prompt was in any
    # process's arguments or environment.
    assert any(CLI_NAMES[provider] in " ".join(argv) for argv, _ in seen.values()), seen
    for argv, environ in seen.values():
        assert not any("dangerously-skip-permissions" in arg for arg in argv), argv
        assert not any("rm -rf" in arg for arg in argv), argv
        assert not any(INJECTION in value for value in environ)
    # The model got it as the user's words, unchanged.
    texts = [request.last_user_text for request in stub.model_requests()]
    assert any(prompt in text for text in texts), texts


# --- T15: the CLIs' own listeners -------------------------------------------------------------


@pytest.mark.parametrize("provider", ["claude_code", "codex"])
def test_t15_stdio_clis_listen_on_no_port(shared: Shared, provider: str) -> None:
    workspace = shared.workspace(f"t15-{provider}")
    gateway = shared.gateway(provider)
    with gateway.client() as client:
        session_id = create_session(client, workspace)
        found: set[tuple[str, str, int | str]] = set()
        events = run_turn(
            client,
            session_id,
            "hello [[slow:1]]",
            on_first_delta=lambda: found.update(listeners(gateway_children(gateway))),
        )
        after = listeners(gateway_children(gateway))

    assert events[-1]["type"] == "turn.completed"
    assert gateway_children(gateway)  # the CLI is still alive for the next turn
    # No TCP listener at all. Claude Code 2.1.330 keeps one unix-domain socket,
    # /tmp/cc-socks/<pid>.sock (its inbox for messages from other local sessions): only its
    # own user may reach it. A sandboxed CLI's /tmp is its own: the path is looked up through
    # the root each of the gateway's children sees.
    roots = [Path(f"/proc/{pid}/root") for pid in gateway_children(gateway)]
    for proto, _, path in found | after:
        assert proto == "unix", found | after
        assert isinstance(path, str)
        places = [root / path.lstrip("/") for root in roots]
        assert_private_socket(next(place for place in places if place.exists()))


def test_t15_opencode_listens_on_loopback_behind_a_password(shared: Shared) -> None:
    workspace = shared.workspace("t15-opencode")
    gateway = shared.gateway("opencode")
    with gateway.client() as client:
        session_id = create_session(client, workspace)
        events = run_turn(client, session_id, "hello")
        assert events[-1]["type"] == "turn.completed"
        # The session's own server in the sandbox (the module's other sessions have theirs).
        server = client.get(f"/v1/sessions/{session_id}").json()["process"]["pid"]
        pids = descendants(server) | {server}
        found = listeners(pids)

        # One TCP listener, on 127.0.0.1 only.
        assert len(found) == 1, found
        ((proto, host, port),) = found
        assert (proto, host) == ("tcp", "127.0.0.1")
        passwords = {
            value.split("=", 1)[1]
            for pid in pids
            for value in read_proc(pid, "environ")
            if value.startswith("OPENCODE_SERVER_PASSWORD=")
        }
        assert len(passwords) == 1
        (password,) = passwords
        assert len(password) >= 32

        base = f"http://127.0.0.1:{port}"
        for path in ("/global/health", "/session", "/global/event", "/doc", "/"):
            assert httpx.get(base + path, timeout=10).status_code == 401, path
            wrong = httpx.get(base + path, auth=(SERVER_USERNAME, "guess"), timeout=10)
            assert wrong.status_code == 401, path
        right = httpx.get(base + "/global/health", auth=(SERVER_USERNAME, password), timeout=10)
        assert right.status_code == 200

        # The gateway's own client still works after the probing: another turn.
        assert run_turn(client, session_id, "hello again")[-1]["type"] == "turn.completed"

    assert password not in gateway.log()
    assert not any(password in " ".join(read_proc(pid, "cmdline")) for pid in pids)
