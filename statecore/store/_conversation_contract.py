"""The storage contract's conversation: a session's message log with its system prompt,
hints, summary and window start. Arguments are checked here, once for every backend; a
backend implements the ``_``-prefixed methods (``statecore.store._base`` has the rest of the
contract)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime

from statecore.core._identifiers import validate_turn_id
from statecore.core._models import (
    Hint,
    SessionRef,
    StoredMessage,
    Summary,
    validate_text,
)
from statecore.core._models import Message as NewMessage
from statecore.store import _change_rules as changes
from statecore.store._change_ledger import RecordsChanges
from statecore.store._inputs import (
    RestoreExtras,
    check_flag,
    check_int,
    check_message_range,
    check_page_limit,
    check_ref,
    check_token_budget,
    checked_append,
    checked_log,
    checked_restore_extras,
)


class ConversationStore(RecordsChanges, abc.ABC, changes=changes.CONVERSATION):
    """The message log of a session, plus system prompt, hints, summary and window start."""

    #: The turn id ``StoreTransaction.begin_turn`` checked in this transaction: that turn's
    #: append does not check it again.
    _opened_turn_id: str | None = None

    async def append(
        self, ref: SessionRef, turn_id: str, messages: Sequence[NewMessage], *, start_index: int = 0
    ) -> list[StoredMessage]:
        """Append ``messages`` as indexes ``start_index, start_index+1, ...`` of turn ``turn_id``.

        Idempotent on (session, turn_id, index): an index already stored is not stored again,
        and the stored message is returned in its place. Tokens are counted here, once, with
        the store's TokenCounter. Sequence numbers increase by one per stored message.
        """
        id_checked = type(turn_id) is str and turn_id == self._opened_turn_id
        checked = checked_append(ref, turn_id, messages, start_index, id_checked=id_checked)
        return await self._append(ref, turn_id, checked, start_index)

    @abc.abstractmethod
    async def _append(
        self, ref: SessionRef, turn_id: str, messages: list[NewMessage], start_index: int
    ) -> list[StoredMessage]:
        """``append`` once its arguments are checked: the backend's own work."""

    async def turn_messages(self, ref: SessionRef, turn_id: str) -> list[StoredMessage]:
        """Messages stored for one turn, by index."""
        check_ref(ref)
        validate_turn_id(turn_id)
        return await self._turn_messages(ref, turn_id)

    @abc.abstractmethod
    async def _turn_messages(self, ref: SessionRef, turn_id: str) -> list[StoredMessage]: ...

    async def messages(
        self,
        ref: SessionRef,
        *,
        from_seq: int | None = None,
        to_seq: int | None = None,
        limit: int | None = None,
        include_retracted: bool = False,
    ) -> list[StoredMessage]:
        """Messages with ``from_seq <= seq <= to_seq`` in ascending seq order, at most
        ``limit`` of them (the first ones). Retracted messages are left out unless
        ``include_retracted`` (inspection and audit)."""
        check_message_range(ref, from_seq, to_seq, limit)
        check_flag(include_retracted, "include_retracted")
        return await self._messages(ref, from_seq, to_seq, limit, include_retracted)

    @abc.abstractmethod
    async def _messages(
        self,
        ref: SessionRef,
        from_seq: int | None,
        to_seq: int | None,
        limit: int | None,
        include_retracted: bool,
    ) -> list[StoredMessage]: ...

    async def tokens_before(self, ref: SessionRef, seq: int) -> int | None:
        """The log's running token total just before its first message at or after ``seq``
        that is not retracted, or None when there is none: what the tokens of a window
        starting at ``seq`` are counted from (the session's ``token_total`` minus this)."""
        check_ref(ref)
        return await self._tokens_before(ref, check_int(seq, "seq"))

    async def _tokens_before(self, ref: SessionRef, seq: int) -> int | None:
        first = await self._messages(ref, seq, None, 1, False)
        return first[0].cumulative_tokens - first[0].tokens if first else None

    async def retract_last(self, ref: SessionRef) -> StoredMessage | None:
        """Take back the newest message that is not retracted yet and return it (None when
        there is none). Nothing is deleted, and the counters and running totals stay as they
        were: the row is marked, and ``messages``, ``tail`` and everything built on them (the
        context window, export) skip it from now on. Only ``clear`` (a reset) removes it."""
        check_ref(ref)
        return await self._retract_last(ref)

    @abc.abstractmethod
    async def _retract_last(self, ref: SessionRef) -> StoredMessage | None: ...

    async def retracted(self, ref: SessionRef) -> dict[int, datetime]:
        """The retracted messages' seqs, ascending, with the time each was retracted."""
        check_ref(ref)
        return await self._retracted(ref)

    @abc.abstractmethod
    async def _retracted(self, ref: SessionRef) -> dict[int, datetime]: ...

    async def tail(
        self, ref: SessionRef, *, max_tokens: int | None = None, max_messages: int | None = None
    ) -> list[StoredMessage]:
        """The newest messages at or after the window start whose token sum fits
        ``max_tokens`` and whose count fits ``max_messages``, ascending, retracted ones left
        out (their tokens still count against ``max_tokens``). Uses the stored
        cumulative token totals: one indexed query, no re-tokenisation, no full scan."""
        check_ref(ref)
        if max_tokens is not None:
            check_token_budget(max_tokens)
        if max_messages is not None:
            check_page_limit(max_messages, "max_messages")
        return await self._tail(ref, max_tokens, max_messages)

    @abc.abstractmethod
    async def _tail(
        self, ref: SessionRef, max_tokens: int | None, max_messages: int | None
    ) -> list[StoredMessage]: ...

    async def set_system_prompt(self, ref: SessionRef, text: str | None) -> None:
        check_ref(ref)
        if text is not None:
            validate_text(text, "system prompt", allow_empty=False)
        await self._set_system_prompt(ref, text)

    @abc.abstractmethod
    async def _set_system_prompt(self, ref: SessionRef, text: str | None) -> None: ...

    async def add_hint(self, ref: SessionRef, text: str) -> Hint:
        check_ref(ref)
        validate_text(text, "hint", allow_empty=False)
        return await self._add_hint(ref, text)

    @abc.abstractmethod
    async def _add_hint(self, ref: SessionRef, text: str) -> Hint: ...

    async def hints(self, ref: SessionRef) -> list[Hint]:
        check_ref(ref)
        return await self._hints(ref)

    @abc.abstractmethod
    async def _hints(self, ref: SessionRef) -> list[Hint]: ...

    async def remove_hint(self, ref: SessionRef, hint_id: int) -> bool:
        check_ref(ref)
        check_int(hint_id, "hint_id")
        return await self._remove_hint(ref, hint_id)

    @abc.abstractmethod
    async def _remove_hint(self, ref: SessionRef, hint_id: int) -> bool: ...

    async def summary(self, ref: SessionRef) -> Summary | None:
        check_ref(ref)
        return await self._summary(ref)

    @abc.abstractmethod
    async def _summary(self, ref: SessionRef) -> Summary | None: ...

    async def set_summary(self, ref: SessionRef, text: str, through_seq: int) -> Summary:
        """Store the running summary covering the log up to ``through_seq`` (tokens counted)."""
        check_ref(ref)
        validate_text(text, "summary", allow_empty=False)
        check_int(through_seq, "through_seq")
        return await self._set_summary(ref, text, through_seq)

    @abc.abstractmethod
    async def _set_summary(self, ref: SessionRef, text: str, through_seq: int) -> Summary: ...

    async def set_window_start(self, ref: SessionRef, seq: int) -> None:
        """Move the window start (compaction). It may only move forward and not past
        ``last_seq + 1``; an invalid value raises InvalidLimitError."""
        check_ref(ref)
        check_int(seq, "seq", minimum=1)
        await self._set_window_start(ref, seq)

    @abc.abstractmethod
    async def _set_window_start(self, ref: SessionRef, seq: int) -> None: ...

    async def clear(self, ref: SessionRef) -> int:
        """Delete the log, hints, summary and system prompt; counters return to zero and the
        next seq is 1 again. Returns the number of messages deleted."""
        check_ref(ref)
        return await self._clear(ref)

    @abc.abstractmethod
    async def _clear(self, ref: SessionRef) -> int: ...

    async def restore(
        self,
        ref: SessionRef,
        messages: Sequence[StoredMessage],
        *,
        hints: Sequence[Hint] = (),
        summary: Summary | None = None,
        system_prompt: str | None = None,
        window_start_seq: int = 1,
    ) -> None:
        """Write an exported log verbatim (seq, turn ids, tokens, timestamps) into an empty
        session: the import half of bundles. Raises AlreadyExistsError if the log is not empty."""
        check_ref(ref)
        log = checked_log(messages)
        last_seq = log[-1].seq if log else 0
        extras = checked_restore_extras(hints, summary, system_prompt, last_seq)
        check_int(window_start_seq, "window_start_seq", minimum=1, maximum=last_seq + 1)
        await self._restore(ref, log, extras, window_start_seq)

    @abc.abstractmethod
    async def _restore(
        self,
        ref: SessionRef,
        log: list[StoredMessage],
        extras: RestoreExtras,
        window_start_seq: int,
    ) -> None: ...
