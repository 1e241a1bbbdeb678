"""The send_message validator's budget check: a message that can never fit the session's
context budget is refused before it is accepted, so it never reaches history.

The budget is the profile's ``max_tokens``, else what the worker reported when it opened the
session or answered a turn (its model's window); until then (the first turn of an
update-with-start) the turn's model activity refuses such a message instead, by the same
rule. Counting tokens is a pure function of the text, so a validator may do it."""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

from statecore.contract._session import SendMessageInput, TurnBudget
from statecore.core._errors import ContextBudgetError, UnknownEncodingError
from statecore.core._message_fit import check_message_fits, most_tokens
from statecore.workflow._activity_calls import refusal

#: Bytes of message text the send_message validator counts in tokens in one workflow task
#: (one of the largest messages: about 0.25 s of one free core for the slowest text to
#: count). Counting runs inside the task, which the SDK fails when it does not yield within
#: 2 s, and Temporal delivers up to 10 updates in one task; the margin is for a worker whose
#: cores are shared (with two per task, eight such messages sent at once stalled a session
#: on a machine loaded several times over). Past this the validator admits, and the turn's
#: model activity refuses a message that can never fit, by the same rule.
MAX_COUNTED_BYTES_PER_TASK = 512 * 1024


class BudgetAdmission:
    """Refuses what can never fit, counting at most MAX_COUNTED_BYTES_PER_TASK a task."""

    def __init__(self) -> None:
        #: The workflow task (by its start time) whose validators last counted tokens, and
        #: how many bytes they counted in it.
        self._counted_in: datetime | None = None
        self._counted_bytes = 0

    def check(
        self, message: SendMessageInput, max_tokens: int | None, learned: TurnBudget | None
    ) -> None:
        """Raise the ContextBudgetExceeded refusal when ``message`` alone is over the budget
        (``max_tokens``, else ``learned``'s)."""
        budget = max_tokens or (learned.max_tokens if learned else None)
        if budget is None:
            return
        turn_message = message.to_message()
        if most_tokens(turn_message) <= budget:
            return  # fits whatever its tokens: nothing to count
        if not self._may_count(len(message.content.encode("utf-8"))):
            return
        try:
            check_message_fits(
                turn_message,
                budget,
                encoding=learned.encoding if learned else None,
            )
        except ContextBudgetError as err:
            raise refusal(err.code, err.message) from None
        except UnknownEncodingError:
            return  # this worker cannot count as the reporting one did: the turn decides

    def _may_count(self, size: int) -> bool:
        """Whether the validators may count ``size`` more bytes of text in this workflow
        task. The count is not history: validators never run on replay, and what they
        decided is recorded as the updates' acceptance."""
        task = workflow.now()
        if task != self._counted_in:
            self._counted_in, self._counted_bytes = task, 0
        if self._counted_bytes + size > MAX_COUNTED_BYTES_PER_TASK:
            return False
        self._counted_bytes += size
        return True
