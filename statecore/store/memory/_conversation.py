"""The message log of a session, in memory."""

from __future__ import annotations

import bisect
from datetime import datetime

from statecore.core._errors import AlreadyExistsError, InvalidLimitError
from statecore.core._models import (
    Hint,
    SessionRef,
    StoredMessage,
    Summary,
)
from statecore.core._models import Message as NewMessage
from statecore.store._conversation_contract import ConversationStore
from statecore.store._inputs import RestoreExtras, check_aware
from statecore.store.memory._context import TxContext
from statecore.store.memory._schema import SessionPartition


def _out(message: StoredMessage) -> StoredMessage:
    # Callers get their own copy: mutating a returned message must not change the log.
    return message.model_copy(deep=True)


class MemoryConversationStore(ConversationStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    async def _append(
        self, ref: SessionRef, turn_id: str, checked: list[NewMessage], start_index: int
    ) -> list[StoredMessage]:
        part = self._ctx.session_for_write(ref)
        info = part.info
        stored: list[StoredMessage] = []
        for offset, message in enumerate(checked):
            index = start_index + offset
            position = part.by_turn.get((turn_id, index))
            if position is not None:
                stored.append(_out(part.messages[position]))
                continue
            tokens = self._ctx.counter.count_message(message)
            row = StoredMessage(
                **message.model_dump(),
                seq=info.last_seq + 1,
                turn_id=turn_id,
                index=index,
                tokens=tokens,
                cumulative_tokens=info.token_total + tokens,
                created_at=self._ctx.now,
            )
            part.by_turn[(turn_id, index)] = len(part.messages)
            part.messages.append(row)
            info = info.model_copy(
                update={
                    "last_seq": row.seq,
                    "message_count": info.message_count + 1,
                    "token_total": row.cumulative_tokens,
                }
            )
            stored.append(_out(row))
        part.info = info
        return stored

    async def _turn_messages(self, ref: SessionRef, turn_id: str) -> list[StoredMessage]:
        part = self._ctx.session(ref)
        found = sorted(
            (index, pos) for (turn, index), pos in part.by_turn.items() if turn == turn_id
        )
        return [_out(part.messages[pos]) for _, pos in found]

    async def _messages(
        self,
        ref: SessionRef,
        from_seq: int | None,
        to_seq: int | None,
        limit: int | None,
        include_retracted: bool,
    ) -> list[StoredMessage]:
        part = self._ctx.session(ref)
        log = part.messages
        start = 0 if from_seq is None else bisect.bisect_left(log, from_seq, key=lambda m: m.seq)
        stop = len(log) if to_seq is None else bisect.bisect_right(log, to_seq, key=lambda m: m.seq)
        picked = [m for m in log[start:stop] if include_retracted or m.seq not in part.retracted]
        if limit is not None:
            picked = picked[:limit]
        return [_out(m) for m in picked]

    async def _retract_last(self, ref: SessionRef) -> StoredMessage | None:
        part = self._ctx.session(ref)
        newest = next((m for m in reversed(part.messages) if m.seq not in part.retracted), None)
        if newest is None:
            return None
        part = self._ctx.session_for_write(ref)
        part.retracted[newest.seq] = self._ctx.now
        # A retraction is an access: the session's idle clock moves, as on SQL.
        part.info = part.info.model_copy(update={"last_accessed": self._ctx.now})
        return _out(newest)

    async def _retracted(self, ref: SessionRef) -> dict[int, datetime]:
        return dict(sorted(self._ctx.session(ref).retracted.items()))

    async def _tail(
        self, ref: SessionRef, max_tokens: int | None, max_messages: int | None
    ) -> list[StoredMessage]:
        part = self._ctx.session(ref)
        log, window_start = part.messages, part.info.window_start_seq
        if not log:
            return []
        newest_total = log[-1].cumulative_tokens
        picked: list[StoredMessage] = []
        for message in reversed(log):
            if message.seq < window_start:
                break
            if message.seq in part.retracted:
                # Taken back: not in the window; its tokens still count against the budget
                # (the running totals include it), which keeps the boundary one lookup.
                continue
            if max_messages is not None and len(picked) >= max_messages:
                break
            # Tokens of this message and everything after it, from the stored running totals.
            suffix_tokens = newest_total - message.cumulative_tokens + message.tokens
            if max_tokens is not None and suffix_tokens > max_tokens:
                break
            picked.append(message)
        return [_out(m) for m in reversed(picked)]

    async def _set_system_prompt(self, ref: SessionRef, text: str | None) -> None:
        part = self._ctx.session_for_write(ref)
        part.info = part.info.model_copy(update={"system_prompt": text})

    async def _add_hint(self, ref: SessionRef, text: str) -> Hint:
        part = self._ctx.session_for_write(ref)
        hint = Hint(id=self._ctx.ws.next_hint_id(), text=text, created_at=self._ctx.now)
        part.hints.append(hint)
        return hint.model_copy()

    async def _hints(self, ref: SessionRef) -> list[Hint]:
        return [h.model_copy() for h in self._ctx.session(ref).hints]

    async def _remove_hint(self, ref: SessionRef, hint_id: int) -> bool:
        if not any(h.id == hint_id for h in self._ctx.session(ref).hints):
            return False
        part = self._ctx.session_for_write(ref)
        part.hints = [h for h in part.hints if h.id != hint_id]
        return True

    async def _summary(self, ref: SessionRef) -> Summary | None:
        summary = self._ctx.session(ref).summary
        return None if summary is None else summary.model_copy()

    async def _set_summary(self, ref: SessionRef, text: str, through_seq: int) -> Summary:
        part = self._ctx.session(ref)
        if through_seq > part.info.last_seq:
            raise InvalidLimitError(
                f"through_seq {through_seq} is past the last message (seq {part.info.last_seq})"
            )
        part = self._ctx.session_for_write(ref)
        part.summary = Summary(
            text=text,
            through_seq=through_seq,
            tokens=self._ctx.counter.count_text(text),
            created_at=self._ctx.now,
        )
        return part.summary.model_copy()

    async def _set_window_start(self, ref: SessionRef, seq: int) -> None:
        info = self._ctx.session(ref).info
        if not info.window_start_seq <= seq <= info.last_seq + 1:
            raise InvalidLimitError(
                f"window start {seq} must be between the current start "
                f"{info.window_start_seq} and last_seq + 1 ({info.last_seq + 1}); it only moves "
                "forward",
                seq=seq,
            )
        part = self._ctx.session_for_write(ref)
        part.info = part.info.model_copy(update={"window_start_seq": seq})

    async def _clear(self, ref: SessionRef) -> int:
        part = self._ctx.session_for_write(ref)
        removed = len(part.messages)
        part.messages, part.by_turn, part.hints, part.summary = [], {}, [], None
        part.retracted = {}
        part.info = part.info.model_copy(
            update={
                "system_prompt": None,
                "last_seq": 0,
                "message_count": 0,
                "token_total": 0,
                "window_start_seq": 1,
            }
        )
        return removed

    async def _restore(
        self,
        ref: SessionRef,
        log: list[StoredMessage],
        extras: RestoreExtras,
        window_start_seq: int,
    ) -> None:
        last_seq = log[-1].seq if log else 0
        part = self._ctx.session(ref)
        if part.messages:
            raise AlreadyExistsError(
                f"session {ref} already has {len(part.messages)} messages; restore needs an "
                "empty log (clear it or import into a new session)"
            )
        part = self._ctx.session_for_write(ref)
        _write_restored(part, log, self._ctx.ws.next_hint_id, extras.hints)
        part.summary = extras.summary
        part.info = part.info.model_copy(
            update={
                "system_prompt": extras.system_prompt,
                "last_seq": last_seq,
                "message_count": len(log),
                "token_total": log[-1].cumulative_tokens if log else 0,
                "window_start_seq": window_start_seq,
            }
        )


def _write_restored(
    part: SessionPartition, log: list[StoredMessage], next_hint_id, hints: list[Hint]
) -> None:
    part.messages = log
    part.by_turn = {(m.turn_id, m.index): pos for pos, m in enumerate(log)}
    # Hint ids are assigned by the store (like an autoincrement); text and time are kept.
    part.hints = part.hints + [
        Hint(id=next_hint_id(), text=h.text, created_at=check_aware(h.created_at)) for h in hints
    ]
