"""The loop every provider follows a turn with, and the outcomes it ends in.

A provider feeds what its CLI says into an inbox; ``TurnLoop.run`` takes one item after another
and hands it to the provider's ``handle``, until ``handle`` returns the turn's outcome or a
deadline passes first:

    idle      no item (and no other sign of life) for ``turn_idle_timeout_s`` while no
              approval waits on a human  →  ``on_idle`` (abort, stop the process), then
              failed ``idle_timeout`` (retryable)
    interrupt ``interrupt_grace_s`` after ``interrupt()`` without the CLI ending the turn
              →  ``on_interrupt_expired``, then interrupted

Approvals and questions the CLI asks for run as tasks of the loop (``ask``,
``ask_question``): while one waits, the turn is not idle; its answer counts as activity;
``withdraw`` cancels one the CLI no longer waits for (unless it was answered already); they
are all cancelled when the turn ends. The clock is injected, so tests drive time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar, cast

from app.events import FailureKind, StreamedText, TurnError, item_of, joined
from app.providers.base import (
    Answers,
    ApprovalAnswer,
    ApprovalRequest,
    QuestionRequest,
    TurnHooks,
    TurnOutcome,
)
from app.settings import ProviderSettings

T = TypeVar("T")
A = TypeVar("A")

Handle = Callable[[T], Awaitable[TurnOutcome | None]]
Hook = Callable[[], Awaitable[None]]
Send = Callable[[ApprovalAnswer], Awaitable[None]]
SendAnswers = Callable[[Answers], Awaitable[None]]


def turn_error(
    provider: str,
    kind: FailureKind,
    message: str,
    *,
    retryable: bool = False,
    stderr_tail: str | None = None,
) -> TurnError:
    return TurnError(
        kind=kind, message=message, retryable=retryable, provider=provider, stderr_tail=stderr_tail
    )


def failure(
    provider: str, kind: FailureKind, message: str, *, retryable: bool = False
) -> TurnOutcome:
    """A failed attempt of ``provider``'s CLI."""
    return TurnOutcome(
        status="failed", error=turn_error(provider, kind, message, retryable=retryable)
    )


def interruption(provider: str, message: str = "interrupted by the client") -> TurnOutcome:
    """An attempt the client interrupted."""
    return TurnOutcome(status="interrupted", error=turn_error(provider, "interrupted", message))


class TurnLoop(Generic[T]):
    """Follows one turn of one provider; ``interrupt`` may be called from any task."""

    def __init__(
        self,
        *,
        provider: str,
        cli: str,
        settings: ProviderSettings,
        hooks: TurnHooks,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider = provider
        self.cli = cli
        """The CLI's name as messages give it (``Claude Code``)."""
        self._settings = settings
        self.hooks = hooks
        self._clock = clock
        self._last_activity = clock()
        self._interrupt_at: float | None = None
        self._approvals: dict[str, asyncio.Task[None]] = {}
        self._answered: set[str] = set()
        self._wake = asyncio.Event()

    # --- what the provider tells the loop -------------------------------------------------

    @property
    def interrupted(self) -> bool:
        return self._interrupt_at is not None

    def interrupt(self) -> None:
        """The client asked to stop the turn: from now on the grace runs (once)."""
        if self._interrupt_at is None:
            self._interrupt_at = self._clock()
            self._wake.set()

    def ask(self, request: ApprovalRequest, send: Send) -> None:
        """Ask the client about ``request`` (as a task of the loop), then ``send`` the answer
        to the CLI."""
        self._track(request.request_id, lambda: self.hooks.request_approval(request), send)

    def ask_question(self, request: QuestionRequest, send: SendAnswers) -> None:
        """Put ``request``'s questions to the client (as a task of the loop), then ``send``
        the answers (None: nobody answered) to the CLI."""
        self._track(request.request_id, lambda: self.hooks.ask_question(request), send)

    def _track(
        self,
        request_id: str,
        answer: Callable[[], Awaitable[A]],
        send: Callable[[A], Awaitable[None]],
    ) -> None:
        async def asking() -> None:
            try:
                result = await answer()
                self._answered.add(request_id)
                await send(result)
            finally:
                self._last_activity = self._clock()  # the agent goes on from here
                self._wake.set()

        self._approvals[request_id] = asyncio.create_task(
            asking(), name=f"{self.provider}-request:{request_id}"
        )

    def withdraw(self, request_id: str) -> None:
        """The CLI no longer waits for an answer to ``request_id``: stop asking, unless the
        client answered already."""
        task = self._approvals.get(request_id)
        if task is not None and request_id not in self._answered:
            task.cancel()

    @property
    def waiting_on_approval(self) -> bool:
        return any(not task.done() for task in self._approvals.values())

    # --- outcomes, as this provider reports them ------------------------------------------

    def failed(
        self,
        kind: FailureKind,
        message: str,
        *,
        retryable: bool = False,
    ) -> TurnOutcome:
        return failure(self.provider, kind, message, retryable=retryable)

    def interrupted_outcome(self, message: str = "interrupted by the client") -> TurnOutcome:
        return interruption(self.provider, message)

    # --- the loop -------------------------------------------------------------------------

    async def run(
        self,
        inbox: asyncio.Queue[T],
        handle: Handle[T],
        *,
        on_idle: Hook | None = None,
        on_interrupt_expired: Hook | None = None,
        activity: Callable[[], float] | None = None,
    ) -> TurnOutcome:
        """Hand each item of ``inbox`` to ``handle`` until it returns an outcome, or a
        deadline ends the turn. ``activity`` gives another sign of life (the last time the
        CLI printed anything, even what produced no item). Every approval task of the turn
        is cancelled on the way out."""
        getter: asyncio.Task[T] | None = None
        waker: asyncio.Task[bool] | None = None
        carried: list[T] = []
        """An item taken from the inbox while joining deltas, to be handled next."""
        try:
            while True:
                self._wake.clear()
                if carried:
                    item = carried.pop()
                elif getter is None and not inbox.empty():  # no task while it keeps up
                    item = inbox.get_nowait()
                else:
                    if getter is None:
                        getter = asyncio.create_task(inbox.get())
                    if waker is None:
                        waker = asyncio.create_task(self._wake.wait())
                    done, _ = await asyncio.wait(
                        {getter, waker},
                        timeout=self._timeout(activity),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    if getter in done:
                        item, getter = getter.result(), None
                    else:
                        if waker in done:
                            waker = None
                            continue  # something changed: the deadlines are read again
                        outcome = await self._deadline(activity, on_idle, on_interrupt_expired)
                        if outcome is not None:
                            return outcome
                        continue
                self._last_activity = self._clock()
                if self.hooks.joins_deltas and isinstance(item, StreamedText):
                    item = self._join_queued(item, inbox, carried)
                outcome = await handle(item)
                if outcome is not None:
                    return outcome
        finally:
            if getter is not None:
                getter.cancel()
            if waker is not None:
                waker.cancel()
            for task in self._approvals.values():
                task.cancel()
            await asyncio.gather(*self._approvals.values(), return_exceptions=True)

    @staticmethod
    def _join_queued(item: T, inbox: asyncio.Queue[T], carried: list[T]) -> T:
        """``item`` with the deltas of the same item queued right behind it joined in (they
        arrived together: one event instead of several, as the event log would make them);
        the first other item taken is put in ``carried``."""
        assert isinstance(item, StreamedText)
        texts: list[str] | None = None
        key = (type(item), item_of(item))
        while not inbox.empty():
            following = inbox.get_nowait()
            if not isinstance(following, StreamedText) or (
                (type(following), item_of(following)) != key
            ):
                carried.append(following)
                break
            if texts is None:
                texts = [item.text]
            texts.append(following.text)
        if texts is None:
            return item
        return cast(T, joined(item, texts))

    def _active_at(self, activity: Callable[[], float] | None) -> float:
        return self._last_activity if activity is None else max(self._last_activity, activity())

    def _timeout(self, activity: Callable[[], float] | None) -> float | None:
        deadlines = []
        if not self.waiting_on_approval:  # waiting on a human is not idleness
            deadlines.append(self._active_at(activity) + self._settings.turn_idle_timeout_s)
        if self._interrupt_at is not None:
            deadlines.append(self._interrupt_at + self._settings.interrupt_grace_s)
        if not deadlines:
            return None
        return max(min(deadlines) - self._clock(), 0.0)

    async def _deadline(
        self,
        activity: Callable[[], float] | None,
        on_idle: Hook | None,
        on_interrupt_expired: Hook | None,
    ) -> TurnOutcome | None:
        """The outcome of the deadline that passed; None when none has (yet)."""
        now = self._clock()
        if (
            self._interrupt_at is not None
            and now - self._interrupt_at >= self._settings.interrupt_grace_s
        ):
            if on_interrupt_expired is not None:
                await on_interrupt_expired()
            return self.interrupted_outcome(
                f"interrupted by the client ({self.cli} did not confirm in time)"
            )
        idle = now - self._active_at(activity)
        if idle < self._settings.turn_idle_timeout_s:  # a newer sign of life came
            return None
        if on_idle is not None:
            await on_idle()
        return self.failed(
            "idle_timeout",
            f"{self.cli} sent nothing for {idle:.0f} s (turn_idle_timeout_s)",
            retryable=True,
        )
