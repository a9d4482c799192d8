"""The web console in a real browser (Chromium), against a live gateway running the real
Claude Code CLI on the stub model: sign in, sessions, streamed text, approvals, interrupt,
failures, and resuming the stream after a reload or a gateway restart without losing or
repeating an event.

Every event the console renders leaves one element with its ``data-seq`` (a visible one, or a
hidden mark where the event is folded into another element or is internal); the tests compare
those with the API's JSON events page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import ARTIFACTS, MISSING, NEEDS_LOGIN
from tests.gateway import TOKEN, GatewayProcess

pytestmark = pytest.mark.e2e


# --- helpers ---------------------------------------------------------------------------------


def sign_in(page: Page, gateway: GatewayProcess) -> None:
    page.goto(gateway.base_url + "/console")
    page.get_by_label("Gateway key").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#app")).to_be_visible()


def open_new_session_dialog(page: Page) -> Locator:
    """The "New session" dialog, opened from the sidebar (wide) or the top bar (phone)."""
    page.locator("#new-session:visible, .new-top:visible").first.click()
    dialog = page.locator("dialog.new-session")
    expect(dialog).to_be_visible()
    return dialog


def create_session(page: Page, workspace: Path, approval_mode: str = "ask") -> str:
    dialog = open_new_session_dialog(page)
    dialog.get_by_label("Workspace").fill(str(workspace))
    dialog.get_by_label("Approval mode").select_option(approval_mode)
    dialog.get_by_role("button", name="Create session").click()
    try:
        expect(page.locator("#session-id")).to_have_text(re.compile(r"^ses_[0-9a-f]+$"))
    except AssertionError as error:
        shown = page.locator(".error").all_inner_texts()
        raise AssertionError(f"no session opened; the console shows {shown}") from error
    expect(page.locator("#stream-state")).to_have_text("stream: live")
    session_id = page.locator("#session-id").inner_text()
    return session_id


def send(page: Page, prompt: str) -> None:
    box = page.get_by_label("Prompt")
    box.fill(prompt)
    box.press("Enter")


def turn_end(page: Page, kind: str) -> Any:
    """The last turn's end line, once it is rendered."""
    locator = page.locator(f"#log .turn-end.{kind}").last
    expect(locator).to_be_visible(timeout=30_000)
    return locator


def rendered_seqs(page: Page) -> list[int]:
    seqs: list[int] = page.eval_on_selector_all(
        "#log [data-seq]", "elements => elements.map(e => Number(e.dataset.seq))"
    )
    return seqs


def api_events(gateway: GatewayProcess, session_id: str) -> list[dict[str, Any]]:
    with gateway.client() as client:
        page = client.get(f"/v1/sessions/{session_id}/events", params={"limit": 1000})
    assert page.status_code == 200, page.text
    events: list[dict[str, Any]] = page.json()["events"]
    return events


def assert_rendered_exactly_once(page: Page, gateway: GatewayProcess, session_id: str) -> None:
    """Every event of the session is on the page exactly once, and nothing else is.

    (Elements sit where they belong, a delta inside its message, so not in seq order.)
    """
    events = api_events(gateway, session_id)
    assert sorted(rendered_seqs(page)) == [e["seq"] for e in events]


def agent_text(page: Page) -> str:
    """The text of the last agent message (its rendered markdown's text)."""
    text: str = page.locator("#log .msg.agent .markdown").last.evaluate("el => el.textContent")
    return text.strip()


def turns(gateway: GatewayProcess, session_id: str) -> list[dict[str, Any]]:
    with gateway.client() as client:
        found: list[dict[str, Any]] = client.get(f"/v1/sessions/{session_id}/turns").json()["turns"]
    return found


# --- tests -----------------------------------------------------------------------------------


def test_sign_in_create_a_session_and_see_the_answer_stream_in(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    page.goto(gateway.base_url + "/console")
    assert page.url == gateway.base_url + "/console/"
    page.get_by_label("Gateway key").fill("not-the-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#signin-error")).to_have_text("The gateway refused this key.")
    expect(page.locator("#app")).to_be_hidden()

    page.get_by_label("Gateway key").fill(TOKEN)
    page.get_by_label("Gateway key").press("Enter")
    expect(page.locator("#app")).to_be_visible()
    page.get_by_role("link", name="Admin").click()  # the providers are on the admin view
    with gateway.client() as client:
        claude = client.get("/v1/providers/claude_code").json()
    assert claude["installed_version"]
    provider = page.locator('#providers li[data-provider="claude_code"]')
    expect(provider).to_contain_text("available")
    expect(provider).to_contain_text(claude["installed_version"])
    expect(page.locator('#providers li[data-provider="codex"]')).to_contain_text("disabled")
    expect(provider.locator(".provider-state")).to_have_text("available")
    assert "access_token" not in page.url
    assert TOKEN not in page.url

    page.get_by_role("link", name="Sessions").click()
    session_id = create_session(page, workspace)
    assert page.url.endswith(f"#session={session_id}")
    expect(page.locator(f'#sessions [data-session-id="{session_id}"]')).to_be_visible()
    expect(page.get_by_label("Prompt")).to_be_focused()

    hostile = "<img src=x onerror=alert(1)> say hello"
    send(page, hostile)
    turn_end(page, "completed")
    expect(page.locator("#log .msg.user .text").last).to_have_text(hostile)
    assert page.locator("#log img").count() == 0  # text, never markup
    assert agent_text(page) == "Hello from stub."
    # The text came in as deltas, live, over the stream opened before the turn: one mark each.
    assert page.locator("#log .msg.agent .mark").count() >= 2
    expect(page.locator("#session-status")).to_have_text("idle")
    assert_rendered_exactly_once(page, gateway, session_id)


def test_a_provider_that_needs_a_login_or_cannot_run_is_shown_as_such_with_the_fix(
    page: Page, gateway: GatewayProcess
) -> None:
    with gateway.client() as client:
        health = client.get(f"/v1/providers/{NEEDS_LOGIN}").json()["health"]
    assert health["status"] == "needs_login"
    sign_in(page, gateway)
    page.get_by_role("link", name="Admin").click()
    login = page.locator(f'#providers li[data-provider="{NEEDS_LOGIN}"]')
    expect(login.locator(".provider-state")).to_have_text("needs login")
    expect(login.locator(".provider-state")).not_to_have_class(re.compile(r"\bcompleted\b"))
    expect(login.locator(".provider-fix")).to_have_text(f"To log in: {health['reason']}")
    expect(login.locator(".provider-fix")).to_contain_text("GEMINI_API_KEY")
    missing = page.locator(f'#providers li[data-provider="{MISSING}"]')
    expect(missing.locator(".provider-state")).to_have_text("unavailable: CLI missing")
    expect(missing.locator(".provider-fix")).to_contain_text("make setup")
    ready = page.locator('#providers li[data-provider="claude_code"]')
    expect(ready.locator(".provider-state")).to_have_text("available")
    expect(ready.locator(".provider-fix")).to_have_count(0)
    page.screenshot(path=str(ARTIFACTS / "providers-needs-login.png"))

    page.get_by_role("link", name="Sessions").click()
    dialog = open_new_session_dialog(page)
    choice = dialog.get_by_label("Provider")
    expect(choice.locator(f'option[value="{NEEDS_LOGIN}"]')).to_have_text(
        f"{NEEDS_LOGIN} (needs login)"
    )
    expect(choice.locator(f'option[value="{NEEDS_LOGIN}"]')).to_be_disabled()
    expect(choice.locator(f'option[value="{MISSING}"]')).to_be_disabled()
    expect(choice.locator('option[value="claude_code"]')).to_be_enabled()


def test_allow_a_tool_call_and_see_its_output(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, "[[tool:bash echo console-allowed > allowed.txt && cat allowed.txt]]")
    approval = page.locator("#log .approval.pending")
    expect(approval).to_be_visible(timeout=30_000)
    card = page.locator("#log .tool.awaiting")  # the approval sits on its tool's card
    expect(card).to_contain_text("$ echo console-allowed > allowed.txt && cat allowed.txt")
    expect(card.locator(".approval.pending")).to_have_count(1)
    expect(page.locator("#session-status")).to_have_text("awaiting_approval")
    allow = approval.get_by_role("button", name="Allow", exact=True)
    expect(allow).to_be_focused()  # the prompt box was empty: Enter answers the approval
    # The documentation's pictures: docs/console/ holds copies of these two.
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "approval.png"))
    page.keyboard.press("Enter")

    turn_end(page, "completed")
    resolved = page.locator("#log .approval.allowed")
    expect(resolved).to_contain_text("Allowed (by the client)")
    assert resolved.get_by_role("button").count() == 0
    tool = page.locator("#log .tool").last
    expect(tool.locator(".tool-output")).to_contain_text("console-allowed")
    expect(tool.locator(".badge")).to_have_text("completed")
    assert agent_text(page).startswith("Tool said: ")
    assert "console-allowed" in agent_text(page)
    assert (workspace / "allowed.txt").read_text() == "console-allowed\n"
    page.screenshot(path=str(ARTIFACTS / "tool-output.png"))
    assert_rendered_exactly_once(page, gateway, session_id)


def test_answer_the_agents_questions(page: Page, gateway: GatewayProcess, workspace: Path) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    color = {
        "question": "Which color?",
        "header": "Color",
        "multiSelect": False,
        "options": [
            {"label": "Red", "description": "warm"},
            {"label": "Blue", "description": "cool"},
        ],
    }
    toppings = {
        "question": "Which toppings?",
        "header": "Toppings",
        "multiSelect": True,
        "options": [{"label": "Cheese", "description": ""}, {"label": "Basil", "description": ""}],
    }
    send(page, "[[call:AskUserQuestion " + json.dumps({"questions": [color, toppings]}) + "]]")
    card = page.locator("#log .question.pending")
    expect(card).to_be_visible(timeout=30_000)
    expect(page.locator("#session-status")).to_have_text("awaiting_approval")
    answer = card.get_by_role("button", name="Answer")
    answer.click()  # nothing chosen: the gateway says what to fix and the card stays
    expect(card.locator(".error")).to_contain_text("is empty")
    card.get_by_label("Blue").check()
    card.get_by_label("Cheese").check()
    card.get_by_label("Basil").check()
    card.get_by_label("Your own answer to: Which toppings?").fill("ham")
    answer.click()

    turn_end(page, "completed")
    resolved = page.locator("#log .question.allowed")
    expect(resolved).to_contain_text(
        "Answered by admin: Which color? → Blue; Which toppings? → Cheese, Basil, ham"
    )
    assert resolved.get_by_role("button").count() == 0
    assert '"Which toppings?"="Cheese, Basil, ham"' in agent_text(page)
    assert_rendered_exactly_once(page, gateway, session_id)


def test_deny_a_tool_call(page: Page, gateway: GatewayProcess, workspace: Path) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, "[[tool:bash touch denied.txt]]")
    approval = page.locator("#log .approval.pending")
    expect(approval).to_be_visible(timeout=30_000)
    approval.get_by_label("Message to the agent (optional)").fill("not in this repository")
    approval.get_by_role("button", name="Deny").click()

    turn_end(page, "completed")
    expect(page.locator("#log .approval.denied")).to_contain_text(
        "Denied (by the client): not in this repository"
    )
    expect(page.locator("#log .tool .badge").last).not_to_have_text("completed")
    assert not (workspace / "denied.txt").exists()
    with gateway.client() as client:
        approvals = client.get(f"/v1/sessions/{session_id}/approvals").json()["approvals"]
    assert [a["status"] for a in approvals] == ["denied"]
    assert_rendered_exactly_once(page, gateway, session_id)


def test_escape_interrupts_a_slow_turn(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, "[[slow:30]]")
    expect(page.locator("#log .msg.agent").last).to_contain_text("tick 3", timeout=30_000)
    expect(page.get_by_role("button", name="Interrupt")).to_be_enabled()
    page.keyboard.press("Escape")
    expect(turn_end(page, "interrupted")).to_contain_text("Turn interrupted")
    expect(page.get_by_role("button", name="Interrupt")).to_be_disabled()
    assert [t["status"] for t in turns(gateway, session_id)] == ["interrupted"]
    assert_rendered_exactly_once(page, gateway, session_id)


def test_a_failed_turn_and_a_retry_are_shown_plainly(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, "[[fail:500:1]] first try fails")
    turn_end(page, "completed")
    expect(page.locator("#log .notice.retry")).to_contain_text(
        re.compile(r"^Retrying in 0\.2 s \(attempt 2 of 2\) after a server error: .*500")
    )
    send(page, "[[error:401]]")
    failed = turn_end(page, "failed")
    expect(failed).to_contain_text("Turn failed: auth")
    (failure,) = [t["error"] for t in turns(gateway, session_id) if t["status"] == "failed"]
    expect(failed.locator(".failure-message")).to_have_text(failure["message"])
    expect(failed).to_contain_text("not retryable")
    assert_rendered_exactly_once(page, gateway, session_id)


def test_reload_mid_turn_continues_the_stream_without_duplicates(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, "[[slow:2]]")
    expect(page.locator("#log .msg.agent").last).to_contain_text("tick 3", timeout=30_000)
    before = rendered_seqs(page)
    page.reload()
    # Same tab: the key and the open session survive; history first, then the live tail.
    expect(page.locator("#session-id")).to_have_text(session_id)
    expect(page.locator("#log .msg.agent").last).to_contain_text("tick 3")
    turn_end(page, "completed")
    after = rendered_seqs(page)
    assert set(before) < set(after)  # the turn went on streaming after the reload
    assert_rendered_exactly_once(page, gateway, session_id)
    (turn,) = turns(gateway, session_id)
    assert agent_text(page) == turn["final_text"].strip()  # markdown drops the trailing space


def test_reopen_a_session_from_the_list_continue_and_close_it(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    with gateway.client() as client:
        created = client.post("/v1/sessions", json={"workspace": str(workspace)})
        assert created.status_code == 201, created.text
        earlier = created.json()["id"]
        response = client.post(f"/v1/sessions/{earlier}/turns", json={"prompt": "say hello"})
        assert response.status_code == 202, response.text
    sign_in(page, gateway)
    item = page.locator(f'#sessions [data-session-id="{earlier}"]')
    expect(item).to_be_visible()
    item.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#session-id")).to_have_text(earlier)
    expect(item).to_have_attribute("aria-current", "true")
    turn_end(page, "completed")  # from history, or live if it was still running
    send(page, "[[echo]]")
    expect(page.locator("#log .turn-end.completed")).to_have_count(2, timeout=30_000)
    assert agent_text(page).startswith("Echo: ")
    page.get_by_role("button", name="Close session").click()
    expect(page.locator("#log .notice.closed")).to_contain_text("Session closed")
    expect(page.locator("#session-status")).to_have_text("closed")
    expect(page.locator("#stream-state")).to_have_text("stream: ended")  # 204: no reconnects
    expect(page.get_by_label("Prompt")).to_be_disabled()
    assert_rendered_exactly_once(page, gateway, earlier)


def test_the_console_reconnects_after_a_gateway_restart(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(page, "say hello")
    turn_end(page, "completed")
    assert gateway.stop() == 0
    expect(page.locator('[data-control="shutdown"]')).to_contain_text(
        "The gateway is shutting down"
    )
    gateway.start()
    expect(page.locator("#stream-state")).to_have_text("stream: live", timeout=30_000)
    send(page, "say hello again")
    expect(page.locator("#log .turn-end.completed")).to_have_count(2, timeout=30_000)
    assert_rendered_exactly_once(page, gateway, session_id)


def test_the_log_follows_a_long_answer_unless_the_reader_scrolled_up(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    """The log is scrolled once per frame, not once per event (a storm of deltas would force a
    layout each): it still ends at the newest text, and leaves a reader who scrolled up alone."""
    sign_in(page, gateway)
    create_session(page, workspace)
    send(page, "[[long:9000@150/12]]")
    turn_end(page, "completed")
    assert page.eval_on_selector("#log", AT_END)
    page.eval_on_selector("#log", "log => { log.scrollTop = 0; }")
    send(page, "[[long:9000@150/12]]")
    turn_end(page, "completed")
    assert page.eval_on_selector("#log", "log => log.scrollTop") == 0
    assert not page.eval_on_selector("#log", AT_END)


AT_END = "log => log.scrollHeight - log.scrollTop - log.clientHeight < 40"


def todo_write(*todos: tuple[str, str]) -> str:
    items = [{"content": text, "status": status, "activeForm": text} for text, status in todos]
    return "[[call:TodoWrite " + json.dumps({"todos": items}) + "]]"


def test_the_plan_panel_shows_the_newest_plan_live_and_after_a_reload(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    panel = page.locator("#plan")
    expect(panel).to_be_hidden()
    send(page, todo_write(("Read the code", "in_progress"), ("Fix the bug", "pending")))
    turn_end(page, "completed")
    expect(panel).to_be_visible()
    entries = page.locator("#plan-entries li")
    expect(entries).to_have_text(["▶ Read the code", "☐ Fix the bug"])

    send(page, todo_write(("Read the code", "completed"), ("Fix the bug", "in_progress")))
    expect(page.locator("#log .turn-end.completed")).to_have_count(2, timeout=30_000)
    newest = ["☑ Read the code", "▶ Fix the bug"]
    expect(entries).to_have_text(newest)  # replaced, not appended
    assert entries.evaluate_all("els => els.map(e => e.dataset.status)") == [
        "completed",
        "in_progress",
    ]
    page.reload()
    expect(page.locator("#session-id")).to_have_text(session_id)
    expect(entries).to_have_text(newest)
    assert_rendered_exactly_once(page, gateway, session_id)


MINUS = "\N{MINUS SIGN}"
"""What the console writes before the count of the lines a change deleted."""


def test_a_turns_changed_files_and_diff_show_and_revert_puts_them_back(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    story = workspace / "console-story.txt"
    story.write_text("once\nupon\na time\n")
    sign_in(page, gateway)
    session_id = create_session(page, workspace)
    send(
        page,
        "[[tool:bash printf 'new\\nlines\\n' > console-new.txt && sed -i s/upon/UPON/ "
        "console-story.txt]]",
    )
    approval = page.locator("#log .approval.pending")
    expect(approval).to_be_visible(timeout=30_000)
    approval.get_by_role("button", name="Allow", exact=True).click()
    ended = turn_end(page, "completed")

    changes = ended.locator("details.changes")
    expect(changes.locator("summary")).to_have_text(f"2 file(s) changed, +3 {MINUS}1")
    changes.locator("summary").click()
    files = changes.locator(".changed-files li")
    expect(files).to_have_count(2)
    expect(files.nth(0)).to_contain_text(f"console-new.txt added · +2 {MINUS}0")
    expect(files.nth(1)).to_contain_text(f"console-story.txt modified · +1 {MINUS}1")
    # Side by side on a wide screen: the old line on the left, its replacement on the right.
    expect(changes.locator(".side.removed")).to_contain_text(["upon"])
    expect(changes.locator(".side.added", has_text="UPON")).to_have_count(1)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "changes.png"))

    revert = changes.locator("button.revert")
    expect(revert).to_have_text("Revert to before this turn")
    revert.click()
    expect(revert).to_have_text("Click again to revert the files")
    assert story.read_text() == "once\nUPON\na time\n"  # one click only asks
    revert.click()
    expect(revert).to_have_text("Reverted")
    expect(page.locator("#log .notice.reverted")).to_contain_text(
        "Workspace reverted to the start of turn 1 by admin: 2 file(s) put back."
    )
    assert story.read_text() == "once\nupon\na time\n"
    assert not (workspace / "console-new.txt").exists()
    assert_rendered_exactly_once(page, gateway, session_id)
