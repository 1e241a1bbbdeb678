"""Where ``StatecoreConversationStore`` keeps what is not a message, in statecore's KV.

All of it lives in the namespace's own KV scope (``KVScope(namespace=...)``, shared by its
sessions), in four buckets:

- ``pydantic_ai.records``: conversation id -> the ``ConversationRecord`` (Pydantic AI's
  dataclass as JSON). The KV revision of this key is what makes a save conditional: a write
  replaces it only at the revision it read in the same transaction.
- ``pydantic_ai.entries``: entry id -> the conversation whose log holds the entry, so an entry
  can be read by its id, as forks and branches ask.
- ``pydantic_ai.bases``: conversation id -> the conversation whose log its history continues
  (a fork's source), while its own log exists.
- ``pydantic_ai.forks``: ``<base>:<conversation>`` for each such link, so a deleted
  conversation's log is kept while another conversation's history still reaches into it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai.conversation_store import ConversationRecord

from statecore.core._errors import CorruptCheckpointError
from statecore.core._models import KVScope
from statecore.store import StoreTransaction

RECORDS = "pydantic_ai.records"
ENTRIES = "pydantic_ai.entries"
BASES = "pydantic_ai.bases"
FORKS = "pydantic_ai.forks"

_RECORD = TypeAdapter(ConversationRecord)


def record_json(record: ConversationRecord) -> Any:
    return json.loads(_RECORD.dump_json(record))


def parse_record(value: Any) -> ConversationRecord:
    try:
        return _RECORD.validate_json(json.dumps(value))
    except ValidationError as exc:
        raise CorruptCheckpointError(f"a stored conversation record does not parse: {exc}") from exc


async def read_record(
    tx: StoreTransaction, scope: KVScope, conversation_id: str
) -> tuple[ConversationRecord, int] | None:
    """The stored record and its KV revision, or None."""
    stored = await tx.kv.get(scope, RECORDS, conversation_id)
    if stored is None:
        return None
    return parse_record(stored.value), stored.revision


async def all_records(tx: StoreTransaction, scope: KVScope) -> list[ConversationRecord]:
    """Every stored record of the namespace (a page of keys at a time)."""
    records: list[ConversationRecord] = []
    after: str | None = None
    while True:
        page = await tx.kv.list_keys(scope, RECORDS, limit=1000, after=after)
        for key in page.keys:
            stored = await read_record(tx, scope, key)
            if stored is not None:
                records.append(stored[0])
        if page.next_after is None:
            return records
        after = page.next_after


async def owner_of(tx: StoreTransaction, scope: KVScope, entry_id: str) -> str | None:
    """The conversation whose log holds ``entry_id``, or None if no log does."""
    stored = await tx.kv.get(scope, ENTRIES, entry_id)
    return str(stored.value) if stored is not None else None


async def has_forks(tx: StoreTransaction, scope: KVScope, conversation_id: str) -> bool:
    page = await tx.kv.list_keys(scope, FORKS, f"{conversation_id}:", limit=1)
    return bool(page.keys)


async def base_of(tx: StoreTransaction, scope: KVScope, conversation_id: str) -> str | None:
    stored = await tx.kv.get(scope, BASES, conversation_id)
    return str(stored.value) if stored is not None else None


async def link_base(tx: StoreTransaction, scope: KVScope, conversation_id: str, base: str) -> None:
    """Record that ``conversation_id``'s history reaches into ``base``'s log (once: a log
    kept for forks keeps the link it had)."""
    if base == conversation_id or await base_of(tx, scope, conversation_id) is not None:
        return
    await tx.kv.put(scope, BASES, conversation_id, base)
    await tx.kv.put(scope, FORKS, f"{base}:{conversation_id}", True)
