"""Browser fixtures: one real gateway for the package (the pinned Claude Code CLI against the
stub model, as in tests/e2e) and a headless Chromium driven by Playwright.

Chromium is Debian's ``/usr/bin/chromium`` (``make test`` installs it when it runs as root);
Playwright's own browser downloads are never used. The console is the build in app/console/
(``make setup``). Each test gets a fresh browser context (its
own sessionStorage) and leaves a screenshot in ``test-artifacts/browser/``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    ViewportSize,
    expect,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError

from app.settings import PINNED_CLI_BIN
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.e2e.providers import CONFIGS
from tests.fakes.gateway import without_credentials
from tests.gateway import ROOT, GatewayProcess
from tests.stub_llm import StubLLM

ARTIFACTS = ROOT / "test-artifacts" / "browser"
NEEDS_LOGIN = "acp:gemini"
"""A provider of the browser tests' gateway whose CLI runs but has no credential."""
MISSING = "acp:qwen"
"""A provider of the browser tests' gateway whose CLI is not installed."""
FAST_RETRY = {"strategies": {"default": {"delays_s": [0.2]}}, "cli_request_retries": 0}


@pytest.fixture(scope="package")
def stub() -> Iterator[StubLLM]:
    with StubLLM() as server:
        yield server


@pytest.fixture(scope="package")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("console") / "roots" / "project"
    path.mkdir(parents=True)
    return path


@pytest.fixture(scope="package")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, stub: StubLLM, workspace: Path
) -> Iterator[GatewayProcess]:
    """The gateway every browser test talks to: Claude Code only, fast same-thread retries;
    two more providers that cannot serve, to be shown as such: Gemini CLI without a
    credential (it needs a login) and Qwen Code not installed."""
    if not (PINNED_CLI_BIN / "claude").exists():
        pytest.fail(f"claude missing from {PINNED_CLI_BIN}: run `make setup`")
    base = tmp_path_factory.mktemp("console-gateway")
    home = base / "home"
    home.mkdir()
    providers: dict[str, Any] = {name: {"enabled": False} for name in CONFIGS}
    providers["claude_code"] = CONFIGS["claude_code"](stub, home)
    providers[NEEDS_LOGIN] = {"enabled": True, **without_credentials(NEEDS_LOGIN, base / "empty")}
    providers[MISSING] = {"enabled": True, "executable": str(base / "not-installed" / "qwen")}
    config: dict[str, Any] = {
        "workspaces": {"roots": [str(workspace.parent)]},
        "sessions": {"approval_timeout_s": 120},
        "selection": {"default": "claude_code"},
        "retry": FAST_RETRY,
        "providers": providers,
        # Every delta as the stub streamed it: the tests count what the console renders of a
        # live stream, and the stub sends its chunks back to back, which joining would make
        # one event or several by timing (the console with joined deltas: benchmark 13).
        "server": {"coalesce_deltas_ms": 0},
        # The tests of the session list create more than a page of sessions each, one test
        # after another, on this one key.
        "limits": {"session_creates_per_minute": 1000},
    }
    process = GatewayProcess(data_dir=base / "data", config=config).start()
    yield process
    process.stop()


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's chromium "
            "(`make test` installs it as root; otherwise `sudo scripts/system-packages.sh "
            "chromium`)"
        )
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


WIDE: ViewportSize = {"width": 1440, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}
"""The two screens the console is checked on: a laptop and a phone (CSS pixels)."""


@pytest.fixture
def viewport(request: pytest.FixtureRequest) -> ViewportSize:
    """The page's size; a test parametrizes it (indirectly) to run on the phone too."""
    size: ViewportSize = getattr(request, "param", WIDE)
    return size


@pytest.fixture
def page(
    browser: Browser, request: pytest.FixtureRequest, viewport: ViewportSize
) -> Iterator[Page]:
    """A fresh tab (1440x900 unless the test asks for the phone); fails the test on a script
    error or a CSP violation."""
    context = browser.new_context(
        viewport=viewport,
        color_scheme="light",
        is_mobile=viewport == PHONE,
        has_touch=viewport == PHONE,
    )
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    # Assertions wait as long as actions: on a loaded two-core machine a page that waits on
    # the gateway and a CLI can take longer than Playwright's default 5 s to show a change.
    expect.set_options(timeout=15_000)
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"script error: {error}"))

    def on_console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            problems.append(f"CSP violation: {message.text}")

    tab.on("console", on_console)
    try:
        yield tab
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        with contextlib.suppress(PlaywrightError):  # a crashed tab leaves no screenshot
            tab.screenshot(path=str(ARTIFACTS / f"{name}.png"))
        context.close()
    assert not problems, problems
