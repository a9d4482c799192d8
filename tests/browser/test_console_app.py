"""What the console shows a person, in real Chromium at 1440x900 and on a 390x844 phone,
against the live gateway running the real Claude Code CLI on the stub model: the agent's
markdown rendered (and hostile markup in it inert), an edit's diff before it is allowed,
sessions found by search, no sideways scrolling on a phone, no serious accessibility
violation (axe-core, from the console's own pinned npm packages), and how long the first
render takes. The documentation's pictures (docs/console/) are copies of the screenshots taken here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from tests.browser.conftest import ARTIFACTS, PHONE, WIDE
from tests.browser.test_console import (
    assert_rendered_exactly_once,
    create_session,
    send,
    sign_in,
    turn_end,
)
from tests.gateway import ROOT, GatewayProcess

pytestmark = pytest.mark.e2e

AXE = ROOT / "console" / "node_modules" / "axe-core" / "axe.min.js"
BOTH = pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["wide", "phone"], indirect=True)

MARKDOWN = [
    "Intro line",
    "",
    "## Results",
    "",
    "- **bold** item",
    "- a [bad link](javascript:window.pwned=1) and <script>window.pwned=2</script>",
    '- <img src=x onerror="window.pwned=3">',
    "",
    "| name | value |",
    "|---|---|",
    "| alpha | 1 |",
    "",
    "```python",
    "def add(x):",
    "    return x + 1  # one more",
    "```",
]


def printf_lines(lines: list[str], name: str = "out.md") -> str:
    """A bash command that writes ``lines`` to a file and prints it (the write makes Claude
    Code ask first; a bare printf it runs without asking)."""
    quoted = " ".join("'" + line.replace("'", "'\\''") + "'" for line in lines)
    return f"[[tool:bash printf '%s\\n' {quoted} > {name} && cat {name}]]"


def allow_pending(page: Page) -> None:
    approval = page.locator("#log .approval.pending").last
    expect(approval).to_be_visible(timeout=30_000)
    approval.get_by_role("button", name="Allow", exact=True).click()


def horizontal_overflow(page: Page) -> dict[str, int]:
    """What would make a phone scroll sideways or cut text off: the page wider than the
    screen, or an element past its right edge that no horizontal scroller of its own (a code
    block, a table, a diff) holds."""
    found: dict[str, int] = page.evaluate(
        """() => {
            const root = document.documentElement;
            const width = root.clientWidth;
            const wide = {};
            if (root.scrollWidth > width) wide.document = root.scrollWidth;
            const held = (el) => {
                for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
                    const overflow = getComputedStyle(up).overflowX;
                    if (overflow === 'auto' || overflow === 'scroll') {
                        return up.getBoundingClientRect().right <= width + 1;
                    }
                    if (overflow === 'hidden' || overflow === 'clip') return false;
                }
                return false;
            };
            for (const el of document.querySelectorAll('body *')) {
                const box = el.getBoundingClientRect();
                if (box.width === 0 || box.right <= width + 1) continue;
                if (getComputedStyle(el).visibility === 'hidden' || held(el)) continue;
                const name = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                    + '.' + [...el.classList].join('.');
                wide[name] = Math.round(box.right);
            }
            return wide;
        }"""
    )
    return found


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it is now."""
    # Evaluated through the DevTools protocol, which the page's CSP does not govern (an
    # injected <script> would be refused, rightly).
    page.evaluate(AXE.read_text() + "\n;0")
    results: dict[str, Any] = page.evaluate(
        "async () => await axe.run(document, {resultTypes: ['violations']})"
    )
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_markdown_and_code_render_and_hostile_markup_stays_inert(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, printf_lines(MARKDOWN))
    allow_pending(page)
    turn_end(page, "completed")

    answer = page.locator("#log .msg.agent .markdown").last
    expect(answer.locator("h2")).to_have_text("Results")
    expect(answer.locator("li strong")).to_have_text("bold")
    expect(answer.locator("table td")).to_have_text(["alpha", "1"])
    code = answer.locator("pre.code code")
    expect(code).to_contain_text("def add(x):")
    expect(code.locator(".hljs-keyword").first).to_have_text("def")  # highlighted
    expect(code.locator(".hljs-comment")).to_have_text("# one more")
    # The hostile parts: raw HTML shown as text, no javascript: link, nothing ran.
    assert answer.locator("script, img, [onerror]").count() == 0
    expect(answer).to_contain_text("<script>window.pwned=2</script>")
    link = answer.get_by_text("bad link")
    expect(link).to_be_visible()
    assert (link.get_attribute("href") or "") == ""
    link.click()
    assert page.evaluate("window.pwned") is None
    page.screenshot(path=str(ARTIFACTS / "markdown.png"))
    assert_rendered_exactly_once(page, gateway, session_id)


@BOTH
def test_an_edit_approval_shows_its_diff_before_allowing(
    page: Page, gateway: GatewayProcess, workspace: Path, viewport: ViewportSize
) -> None:
    phone = viewport == PHONE
    target = workspace / ("edit-phone.py" if phone else "edit-wide.py")
    target.write_text("def hello():\n    return 'hi'\n")
    edit = {
        "file_path": str(target),
        "old_string": "def hello():\n    return 'hi'\n",
        "new_string": "def hello(name: str) -> str:\n    return f'hi {name}'\n",
    }
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, "[[call:Edit " + json.dumps(edit) + "]]")

    card = page.locator("#log .tool.kind-edit").last
    expect(card).to_have_class(re.compile(r"\bawaiting\b"), timeout=30_000)
    expect(card.locator(".diff-path")).to_have_text(str(target))
    if phone:  # unified on a narrow screen
        expect(card.locator(".diff-line.removed")).to_have_text(
            ["1-def hello():", "2-    return 'hi'"]
        )
        expect(card.locator(".diff-line.added").first).to_contain_text(
            "+def hello(name: str) -> str:"
        )
    else:  # side by side on a wide one
        expect(card.locator(".side.removed").first).to_contain_text("def hello():")
        expect(card.locator(".side.added").first).to_contain_text("def hello(name: str) -> str:")
    allow = card.get_by_role("button", name="Allow", exact=True)
    diff_box = card.locator(".diff").bounding_box()
    allow_box = allow.bounding_box()
    assert diff_box
    assert allow_box
    assert diff_box["y"] < allow_box["y"]  # the diff comes first
    expect(page.locator("#session-status")).to_have_text("awaiting_approval")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / ("phone-approval.png" if phone else "edit-approval.png")))

    if phone:
        # One thumb: the bar at the bottom of the screen answers it.
        bar = page.locator(".pending-bar")
        expect(bar).to_contain_text("Allow Edit?")
        thumb = bar.get_by_role("button", name="Allow", exact=True)
        box = thumb.bounding_box()
        assert box
        assert box["y"] > viewport["height"] * 0.6, box
        thumb.click()
    else:
        allow.click()
    expect(card.locator(".approval.allowed")).to_contain_text("Allowed (by the client)")
    expect(page.locator(".pending-bar")).to_have_count(0)
    turn_end(page, "completed")
    assert horizontal_overflow(page) == {}
    assert_rendered_exactly_once(page, gateway, session_id)


def test_a_session_is_found_by_search_and_filters(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    with gateway.client() as client:

        def made(**body: Any) -> str:
            response = client.post("/v1/sessions", json={"workspace": str(workspace), **body})
            assert response.status_code == 201, response.text
            session_id: str = response.json()["id"]
            return session_id

        titled = made(metadata={"title": "Zebra migration plan"})
        untitled = made()
        response = client.post(
            f"/v1/sessions/{untitled}/turns", json={"prompt": "Find the walrus in the logs"}
        )
        assert response.status_code == 202, response.text
        closed = made(metadata={"title": "An old zebra session"})
        assert client.delete(f"/v1/sessions/{closed}").status_code == 200
        # Newer sessions than a page holds: the gateway searches, not the loaded rows.
        for _ in range(55):
            made(metadata={"title": "Unrelated"})
    searched: list[str] = []
    page.on(
        "request", lambda request: searched.append(request.url) if "q=" in request.url else None
    )
    sign_in(page, gateway)
    rows = page.locator("#sessions [data-session-id]")
    search = page.get_by_label("Search sessions")

    search.fill("zebra mig")
    expect(rows).to_have_count(1)
    assert any("/v1/sessions?" in url and "q=zebra+mig" in url for url in searched), searched
    expect(rows.first).to_have_attribute("data-session-id", titled)
    expect(rows.first).to_contain_text("Zebra migration plan")

    search.fill("walrus")  # no title: the first prompt names it
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-session-id", untitled)
    expect(rows.first).to_contain_text("Find the walrus in the logs")

    search.fill("zebra")
    expect(rows).to_have_count(2)
    page.get_by_label("Status filter").select_option("closed")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-session-id", closed)
    rows.first.click()
    expect(page.locator("#session-id")).to_have_text(closed)
    expect(page.locator("#chat-title")).to_have_text("An old zebra session")
    page.screenshot(path=str(ARTIFACTS / "search.png"))


@pytest.mark.parametrize("viewport", [PHONE], ids=["phone"], indirect=True)
def test_nothing_scrolls_sideways_on_a_phone(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    sign_in(page, gateway)
    assert horizontal_overflow(page) == {}
    create_session(page, workspace)
    wide = [
        "x" * 300,
        "",
        "```",
        "y" * 300,
        "```",
        "",
        "| a | b | c | d | e | f |",
        "|---|---|---|---|---|---|",
    ]
    wide.append("| " + " | ".join(["a-long-cell-value"] * 6) + " |")
    send(page, printf_lines(wide))
    allow_pending(page)
    turn_end(page, "completed")
    assert horizontal_overflow(page) == {}
    expect(page.locator("#log")).to_be_visible()
    log = page.locator("#log").bounding_box()
    assert log
    assert log["height"] > PHONE["height"] * 0.4, log  # the transcript comes first
    page.screenshot(path=str(ARTIFACTS / "phone-session.png"))
    page.get_by_role("button", name="Sessions").click()
    expect(page.locator("#sessions")).to_be_visible()
    assert horizontal_overflow(page) == {}
    page.get_by_role("link", name="Admin").click()
    expect(page.locator("#providers li").first).to_be_visible()
    assert horizontal_overflow(page) == {}


@BOTH
def test_no_serious_accessibility_violation(
    page: Page, gateway: GatewayProcess, workspace: Path, viewport: ViewportSize
) -> None:
    page.goto(gateway.base_url + "/console/")
    expect(page.get_by_label("Gateway key")).to_be_visible()
    assert serious_violations(page) == [], "sign-in"
    sign_in(page, gateway)
    create_session(page, workspace)
    send(page, "[[tool:bash echo axe > axe.txt]]")
    expect(page.locator("#log .approval.pending")).to_be_visible(timeout=30_000)
    assert serious_violations(page) == [], "a session with an approval"
    page.emulate_media(color_scheme="dark")
    assert serious_violations(page) == [], "a session with an approval, dark"
    page.emulate_media(color_scheme="light")
    allow_pending(page)
    turn_end(page, "completed")
    page.get_by_role("link", name="Admin").click()
    expect(page.locator("#providers li").first).to_be_visible()
    expect(page.locator("#usage-total")).to_be_visible()
    assert serious_violations(page) == [], "admin"
    page.emulate_media(color_scheme="dark")
    assert serious_violations(page) == [], "admin, dark"
    name = "admin-dark" if viewport == PHONE else "admin"
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_time_to_first_render(page: Page, gateway: GatewayProcess, workspace: Path) -> None:
    """Measured, for the documentation: from navigation to the console's first frame, and to an
    open session's transcript after a reload. Bounded loosely: a regression of an order of
    magnitude fails, a slow machine does not."""
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, "say hello")
    turn_end(page, "completed")
    page.reload()
    expect(page.locator("#log .turn-end.completed")).to_be_visible()
    timings: dict[str, float] = page.evaluate(
        """() => {
            const nav = performance.getEntriesByType('navigation')[0];
            const mark = performance.getEntriesByName('console-rendered')[0];
            return {first_render_ms: mark.startTime,
                    dom_content_loaded_ms: nav.domContentLoadedEventEnd,
                    transcript_ms: performance.now()};
        }"""
    )
    with gateway.client() as client:
        assert client.get(f"/v1/sessions/{session_id}").status_code == 200
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "timings.json").write_text(json.dumps(timings, indent=2))
    assert 0 < timings["first_render_ms"] < 5_000, timings


def test_the_session_list_reads_older_pages_as_it_scrolls(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    with gateway.client() as client:
        made = []
        for number in range(55):  # more than a page (50)
            response = client.post(
                "/v1/sessions",
                json={"workspace": str(workspace), "metadata": {"title": f"Scroll {number:02d}"}},
            )
            assert response.status_code == 201, response.text
            made.append(response.json()["id"])
            assert client.delete(f"/v1/sessions/{made[-1]}").status_code == 200
    sign_in(page, gateway)
    oldest = page.locator(f'#sessions [data-session-id="{made[0]}"]')
    newest = page.locator(f'#sessions [data-session-id="{made[-1]}"]')
    expect(newest).to_be_visible()
    expect(oldest).to_have_count(0)  # not on the first page
    page.locator("#sessions li").last.scroll_into_view_if_needed()
    expect(oldest).to_have_count(1)
    expect(oldest).to_contain_text("Scroll 00")
