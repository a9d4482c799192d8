"""The console's "New session" form on a Git repository and its fork button, in a real
browser (Chromium) against the live gateway running the real Claude Code CLI on the stub
model (the fixtures of tests/browser/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_console import (
    assert_rendered_exactly_once,
    create_session,
    open_new_session_dialog,
    send,
    sign_in,
    turns,
)
from tests.gateway import GatewayProcess

pytestmark = pytest.mark.e2e

IDENTITY = ("-c", "user.name=Test", "-c", "user.email=test@example.invalid")


def git(repository: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *IDENTITY, "-C", str(repository), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def files_in(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in directory.iterdir() if p.is_file()}


def test_a_session_on_a_repository_shows_its_branch_and_base(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    repo = Path(os.path.realpath(workspace.parent / "console-repo"))
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "first")
    head = git(repo, "rev-parse", "HEAD")
    sign_in(page, gateway)
    form = open_new_session_dialog(page)
    expect(form.get_by_label("Repository")).to_be_hidden()

    form.get_by_label("Git worktree").check()
    expect(form.get_by_label("Workspace")).to_be_hidden()
    form.get_by_label("Repository").fill(str(repo))
    form.get_by_label("Ref").fill("no-such-ref")
    form.get_by_role("button", name="Create session").click()
    expect(page.locator("#create-error")).not_to_be_empty()  # the gateway's problem, shown
    expect(page.locator("#session-id")).to_have_count(0)

    form.get_by_label("Ref").fill("main")
    form.get_by_label("Branch").fill("console/try")
    form.get_by_role("button", name="Create session").click()
    expect(page.locator("#session-id")).to_have_text(re.compile(r"^ses_[0-9a-f]+$"))
    session_id = page.locator("#session-id").inner_text()
    place = page.locator("#session-place")
    expect(place).to_have_text(f"repository {repo} · branch console/try · base {head[:12]}")
    expect(page.locator(f'#sessions [data-session-id="{session_id}"]')).to_contain_text(
        f"{repo} @ console/try"
    )
    with gateway.client() as client:
        session = client.get(f"/v1/sessions/{session_id}").json()
    assert (session["repository"], session["branch"], session["base"]) == (
        str(repo),
        "console/try",
        head,
    )
    tree = Path(session["workspace"])
    assert tree != repo
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD") == "console/try"

    form = open_new_session_dialog(page)  # it remembers the worktree choice
    expect(form.get_by_label("Repository")).to_have_value(str(repo))
    form.get_by_label("Directory").check()  # back to a plain workspace: the repository hides
    expect(form.get_by_label("Repository")).to_be_hidden()
    expect(form.get_by_label("Workspace")).to_be_visible()


def test_fork_at_turn_1_of_2_opens_a_session_with_turn_1s_files(
    page: Page, gateway: GatewayProcess, workspace: Path
) -> None:
    project = workspace.parent / "fork-project"
    project.mkdir()
    sign_in(page, gateway)
    parent = create_session(page, project)
    completed = page.locator("#log .turn-end.completed")
    for count, name in enumerate(("one", "two"), start=1):
        send(page, f"[[tool:bash printf '{name}\\n' > {name}.txt]]")
        approval = page.locator("#log .approval.pending")
        expect(approval).to_be_visible(timeout=30_000)
        approval.get_by_role("button", name="Allow", exact=True).click()
        expect(completed).to_have_count(count, timeout=30_000)
    assert files_in(project) == {"one.txt": "one\n", "two.txt": "two\n"}
    first = min(turns(gateway, parent), key=lambda t: t["number"])

    fork = completed.first.get_by_role("button", name="Fork from this turn")
    expect(completed.nth(1).get_by_role("button", name="Fork from this turn")).to_be_visible()
    fork.click()

    title = page.locator("#session-id")
    expect(title).not_to_have_text(parent)
    expect(title).to_have_text(re.compile(r"^ses_[0-9a-f]+$"))
    child = title.inner_text()
    assert page.url.endswith(f"#session={child}")
    expect(page.locator("#stream-state")).to_have_text("stream: live")
    expect(page.locator("#session-origin")).to_have_text(f"forked from {parent} at turn 1")
    expect(page.locator("#log .notice.forked")).to_contain_text(f"Forked from {parent} at turn 1 (")
    expect(page.locator(f'#sessions [data-session-id="{child}"]')).to_contain_text(
        f"fork of {parent}"
    )
    with gateway.client() as client:
        made = client.get(f"/v1/sessions/{child}").json()
    assert (made["forked_from"], made["forked_at"]) == (parent, first["id"])
    assert Path(made["workspace"]) != project
    assert files_in(Path(made["workspace"])) == {"one.txt": "one\n"}  # turn 1's files only
    assert files_in(project) == {"one.txt": "one\n", "two.txt": "two\n"}  # untouched

    send(page, "[[echo]] in the fork")
    expect(page.locator("#log .turn-end.completed")).to_have_count(1, timeout=30_000)
    assert_rendered_exactly_once(page, gateway, child)

    page.locator("#session-origin a").click()  # back to the session forked
    expect(title).to_have_text(parent)
    expect(page.locator("#session-origin")).to_be_hidden()
    told = page.locator("#log .notice.forked")
    expect(told).to_contain_text(f"Forked at turn 1 into {child}")
    assert_rendered_exactly_once(page, gateway, parent)
