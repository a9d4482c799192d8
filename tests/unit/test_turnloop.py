"""The shared turn loop: items to an outcome, the idle deadline (paused while an approval waits),
the interrupt grace, and the turn's approval tasks. Time is the test's (an injected clock)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from app.events import MessageDelta, Question, QuestionAnswer, ReasoningDelta, ToolOutput
from app.providers.base import (
    Answers,
    ApprovalAnswer,
    ApprovalRequest,
    QuestionRequest,
    TurnOutcome,
)
from app.providers.turnloop import TurnLoop
from app.settings import ProviderSettings
from tests.fakes.hooks import RecordingHooks

IDLE_S = 100.0


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock, hooks: RecordingHooks, **settings: Any) -> TurnLoop[str]:
    values = {"turn_idle_timeout_s": IDLE_S, "interrupt_grace_s": 5.0, **settings}
    return TurnLoop(
        provider="claude_code",
        cli="Claude Code",
        settings=ProviderSettings(**values),
        hooks=hooks,
        clock=clock,
    )


REQUEST = ApprovalRequest(request_id="r1", tool="Bash", input={"command": "ls"}, options=("allow",))
DONE = TurnOutcome(status="completed", final_text="done")


async def test_items_are_handled_in_order_until_one_ends_the_turn() -> None:
    loop = make(Clock(), RecordingHooks())
    inbox: asyncio.Queue[str] = asyncio.Queue()
    for item in ("a", "b", "end", "never"):
        inbox.put_nowait(item)
    seen: list[str] = []

    async def handle(item: str) -> TurnOutcome | None:
        seen.append(item)
        return DONE if item == "end" else None

    assert await loop.run(inbox, handle) == DONE
    assert seen == ["a", "b", "end"]
    assert inbox.get_nowait() == "never"


async def test_a_quiet_turn_fails_as_idle_after_the_idle_hook() -> None:
    clock = Clock()
    loop = make(clock, RecordingHooks())
    clock.now += IDLE_S + 1  # nothing arrived since the turn began
    stopped: list[bool] = []

    async def on_idle() -> None:
        stopped.append(True)

    outcome = await loop.run(asyncio.Queue(), _never, on_idle=on_idle)
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert (outcome.error.kind, outcome.error.retryable) == ("idle_timeout", True)
    assert "Claude Code sent nothing for 101 s (turn_idle_timeout_s)" in outcome.error.message
    assert stopped == [True]


async def test_another_sign_of_life_keeps_the_turn_going() -> None:
    clock = Clock()
    loop = make(clock, RecordingHooks())
    inbox: asyncio.Queue[str] = asyncio.Queue()
    clock.now += IDLE_S + 1
    task = asyncio.create_task(loop.run(inbox, _ends_on("end"), activity=lambda: clock.now - 1))
    inbox.put_nowait("tick")
    inbox.put_nowait("end")
    assert await task == DONE


async def test_an_approval_waiting_on_a_human_is_not_idleness() -> None:
    clock = Clock()
    hooks = RecordingHooks()
    loop = make(clock, hooks, interrupt_grace_s=1e9)
    inbox: asyncio.Queue[str] = asyncio.Queue()
    sent: list[ApprovalAnswer] = []

    async def handle(item: str) -> TurnOutcome | None:
        if item == "ask":
            loop.ask(REQUEST, _record(sent))
        return DONE if item == "end" else None

    inbox.put_nowait("ask")
    task = asyncio.create_task(loop.run(inbox, handle))
    await asyncio.wait_for(hooks.asked.wait(), 5)
    clock.now += 10 * IDLE_S  # a long wait for the human
    loop.interrupt()  # makes the loop read its deadlines again (its grace never passes)
    # Had the wait counted as idleness, the turn would end at once.
    done, _ = await asyncio.wait({task}, timeout=0.2)
    assert not done
    assert loop.waiting_on_approval
    hooks.pending["r1"].set_result(ApprovalAnswer(decision="allow"))
    inbox.put_nowait("end")
    assert await task == DONE
    assert sent == [ApprovalAnswer(decision="allow")]


async def test_a_withdrawn_request_stops_asking_unless_it_was_answered() -> None:
    hooks = RecordingHooks()
    loop = make(Clock(), hooks)
    inbox: asyncio.Queue[str] = asyncio.Queue()
    sent: list[ApprovalAnswer] = []

    async def handle(item: str) -> TurnOutcome | None:
        if item == "ask":
            loop.ask(REQUEST, _record(sent))
        elif item == "withdraw":
            loop.withdraw("r1")
        return DONE if item == "end" else None

    task = asyncio.create_task(loop.run(inbox, handle))
    inbox.put_nowait("ask")
    await asyncio.wait_for(hooks.asked.wait(), 5)
    inbox.put_nowait("withdraw")
    inbox.put_nowait("end")
    assert await task == DONE
    assert hooks.pending["r1"].cancelled()  # the human is no longer asked
    assert sent == []


QUESTION = QuestionRequest(
    request_id="q1", tool="AskUserQuestion", questions=(Question(prompt="Which color?"),)
)


async def test_a_question_waiting_on_a_human_is_not_idleness_and_its_answers_are_sent() -> None:
    clock = Clock()
    hooks = RecordingHooks()
    loop = make(clock, hooks, interrupt_grace_s=1e9)
    inbox: asyncio.Queue[str] = asyncio.Queue()
    sent: list[Answers] = []

    async def send(answers: Answers) -> None:
        sent.append(answers)

    async def handle(item: str) -> TurnOutcome | None:
        if item == "ask":
            loop.ask_question(QUESTION, send)
        return DONE if item == "end" else None

    inbox.put_nowait("ask")
    task = asyncio.create_task(loop.run(inbox, handle))
    await asyncio.wait_for(hooks.asked.wait(), 5)
    assert hooks.questions == [QUESTION]
    clock.now += 10 * IDLE_S
    loop.interrupt()  # the deadlines are read again; the grace never passes
    done, _ = await asyncio.wait({task}, timeout=0.2)
    assert not done
    assert loop.waiting_on_approval
    answers = (QuestionAnswer(text="teal"),)
    hooks.pending_questions["q1"].set_result(answers)
    inbox.put_nowait("end")
    assert await task == DONE
    assert sent == [answers]


async def test_a_withdrawn_question_stops_asking() -> None:
    hooks = RecordingHooks()
    loop = make(Clock(), hooks)
    inbox: asyncio.Queue[str] = asyncio.Queue()
    sent: list[Answers] = []

    async def send(answers: Answers) -> None:
        sent.append(answers)

    async def handle(item: str) -> TurnOutcome | None:
        if item == "ask":
            loop.ask_question(QUESTION, send)
        elif item == "withdraw":
            loop.withdraw("q1")
        return DONE if item == "end" else None

    task = asyncio.create_task(loop.run(inbox, handle))
    inbox.put_nowait("ask")
    await asyncio.wait_for(hooks.asked.wait(), 5)
    inbox.put_nowait("withdraw")
    inbox.put_nowait("end")
    assert await task == DONE
    assert hooks.pending_questions["q1"].cancelled()
    assert hooks.withdrawn == ["q1"]
    assert sent == []


async def test_an_interrupt_not_confirmed_in_its_grace_ends_the_turn() -> None:
    clock = Clock()
    loop = make(clock, RecordingHooks(), interrupt_grace_s=0.01)
    expired: list[bool] = []

    async def on_expired() -> None:
        expired.append(True)

    task = asyncio.create_task(loop.run(asyncio.Queue(), _never, on_interrupt_expired=on_expired))
    await asyncio.sleep(0)
    loop.interrupt()
    clock.now += 1  # past the grace by the loop's clock once it wakes
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.status == "interrupted"
    assert outcome.error is not None
    assert "Claude Code did not confirm in time" in outcome.error.message
    assert expired == [True]
    assert loop.interrupted


async def test_approval_tasks_are_cancelled_when_the_turn_ends() -> None:
    hooks = RecordingHooks()
    loop = make(Clock(), hooks)
    inbox: asyncio.Queue[str] = asyncio.Queue()

    async def handle(item: str) -> TurnOutcome | None:
        if item == "ask":
            loop.ask(REQUEST, _record([]))
        return DONE if item == "end" else None

    inbox.put_nowait("ask")
    task = asyncio.create_task(loop.run(inbox, handle))
    await asyncio.wait_for(hooks.asked.wait(), 5)
    inbox.put_nowait("end")
    assert await task == DONE
    assert hooks.pending["r1"].cancelled()
    assert not loop.waiting_on_approval


async def _never(item: str) -> TurnOutcome | None:
    pytest.fail(f"no item was expected, got {item!r}")


def _ends_on(last: str) -> Any:
    async def handle(item: str) -> TurnOutcome | None:
        return DONE if item == last else None

    return handle


def _record(sent: list[ApprovalAnswer]) -> Any:
    async def send(answer: ApprovalAnswer) -> None:
        sent.append(answer)

    return send


# --- deltas queued together ------------------------------------------------------------------


class JoiningHooks(RecordingHooks):
    joins_deltas = True


@pytest.mark.parametrize("joining", [True, False])
async def test_deltas_of_one_item_queued_together_are_handed_over_joined(joining: bool) -> None:
    hooks = JoiningHooks() if joining else RecordingHooks()
    loop: TurnLoop[object] = TurnLoop(
        provider="claude_code",
        cli="Claude Code",
        settings=ProviderSettings(turn_idle_timeout_s=IDLE_S),
        hooks=hooks,
        clock=Clock(),
    )
    inbox: asyncio.Queue[object] = asyncio.Queue()
    items: list[object] = [
        MessageDelta(message_id="a", text="1"),
        MessageDelta(message_id="a", text="2"),
        MessageDelta(message_id="a", text="3"),
        ReasoningDelta(message_id="a", text="r"),
        MessageDelta(message_id="b", text="4"),
        ToolOutput(tool_id="t", text="o1"),
        ToolOutput(tool_id="t", text="o2"),
        "end",
    ]
    for item in items:
        inbox.put_nowait(item)
    seen: list[object] = []

    async def handle(item: object) -> TurnOutcome | None:
        seen.append(item)
        return DONE if item == "end" else None

    assert await loop.run(inbox, handle) == DONE
    if not joining:
        assert seen == items
        return
    assert seen == [
        MessageDelta(message_id="a", text="123"),
        ReasoningDelta(message_id="a", text="r"),
        MessageDelta(message_id="b", text="4"),
        ToolOutput(tool_id="t", text="o1o2"),
        "end",
    ]
