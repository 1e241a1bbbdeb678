"""Which store owns a bucket of a session's KV scope, and how to count and clear one store.

A session's KV scope is shared by four stores:

- ``tools``: buckets ``tool.<tool name>`` (ToolSlots);
- ``task``: buckets starting with ``task.`` (TaskSlots keeps ``task.records``);
- ``conversation``: ``turn.*`` (the latest turn number, see ``statecore.operations._turn_commit``)
  and ``turn``, where turn records lived before they had a store of their own
  (``tx.turns``); these go away with the log;
- ``kv``: every other bucket, the user's.

User code may not write the reserved names (``validate_user_bucket``), so "reset kv",
"reset tools", "reset task" and "reset conversation" each remove exactly their own rows. The
contract counts and clears by bucket prefix; where one store's bucket name is a prefix of
another store's (user bucket ``turnip`` vs ``turn``), these helpers fall back to exact,
key-by-key work instead of letting a prefix reach into a neighbour.
"""

from __future__ import annotations

from statecore.core._errors import InvalidIdentifierError
from statecore.core._limits import MAX_PAGE_SIZE
from statecore.core._models import KVScope, validate_identifier
from statecore.store._kv_contract import KVStore

TOOL_BUCKET_PREFIX = "tool."
TASK_BUCKET_PREFIX = "task."
TURN_BUCKET_PREFIX = "turn."
#: Share grants and their bookkeeping, in the namespace's own scope (statecore.operations._shares).
SHARE_BUCKET_PREFIX = "share."
#: Bare names reserved as well: "turn" holds turn records; "tool"/"task" would read like slots.
RESERVED_BUCKET_NAMES: tuple[str, ...] = ("tool", "task", "turn", "share")
#: The stores that live in a session's KV scope.
KV_STORES: tuple[str, ...] = ("conversation", "kv", "tools", "task")


def bucket_store(bucket: str) -> str:
    """The store a session-scope bucket belongs to: tools, task, conversation or kv."""
    if bucket.startswith(TOOL_BUCKET_PREFIX):
        return "tools"
    if bucket.startswith(TASK_BUCKET_PREFIX):
        return "task"
    if bucket == "turn" or bucket.startswith(TURN_BUCKET_PREFIX):
        return "conversation"
    return "kv"


def is_reserved_bucket(bucket: str) -> bool:
    """True for buckets that statecore itself writes (slots and turn records)."""
    return bucket_store(bucket) != "kv"


def validate_user_bucket(bucket: str) -> str:
    """Return ``bucket`` if user code may use it through the public KV surface.

    Raises InvalidIdentifierError for malformed names and for reserved ones: ``tool``,
    ``task``, ``turn`` and anything starting with ``tool.``, ``task.`` or ``turn.``."""
    validate_identifier(bucket, "bucket")
    reserved = is_reserved_bucket(bucket) or bucket.startswith(SHARE_BUCKET_PREFIX)
    if bucket in RESERVED_BUCKET_NAMES or reserved:
        raise InvalidIdentifierError(
            f"bucket {bucket!r} is reserved: 'tool', 'task', 'turn', 'share' and names starting "
            "with 'tool.', 'task.', 'turn.' or 'share.' hold statecore's tools/task slots, turn "
            "records and share grants; use ToolSlots/TaskSlots for that data or pick another "
            "bucket name",
            value=bucket,
        )
    return bucket


async def bucket_key_counts(kv: KVStore, scope: KVScope) -> dict[str, int]:
    """Live keys per bucket, exactly, from one prefix count per bucket: a bucket's own count
    is its prefix count minus the buckets that extend its name (longest names first)."""
    counts: dict[str, int] = {}
    for bucket in sorted(await kv.buckets(scope), key=len, reverse=True):
        extended = sum(n for other, n in counts.items() if other.startswith(bucket))
        counts[bucket] = await kv.count(scope, bucket) - extended
    return counts


async def store_key_counts(kv: KVStore, scope: KVScope) -> dict[str, int]:
    """Live keys per store of KV_STORES."""
    totals = dict.fromkeys(KV_STORES, 0)
    for bucket, count in (await bucket_key_counts(kv, scope)).items():
        totals[bucket_store(bucket)] += count
    return totals


async def delete_bucket_keys(kv: KVStore, scope: KVScope, bucket: str) -> int:
    """Delete every live key of exactly one bucket (no prefix match), page by page."""
    deleted = 0
    after: str | None = None
    while True:
        page = await kv.list_keys(scope, bucket, "", limit=MAX_PAGE_SIZE, after=after)
        for key in page.keys:
            deleted += int(await kv.delete(scope, bucket, key))
        if page.next_after is None:
            return deleted
        after = page.next_after


async def clear_bucket(kv: KVStore, scope: KVScope, bucket: str, present: list[str]) -> int:
    """Delete one bucket's keys. One prefix statement when no other ``present`` bucket
    extends its name, else key by key so the neighbour is untouched."""
    if any(other != bucket and other.startswith(bucket) for other in present):
        return await delete_bucket_keys(kv, scope, bucket)
    return await kv.clear(scope, bucket)


async def clear_store(kv: KVStore, scope: KVScope, store: str) -> int:
    """Delete every key of one store of KV_STORES in the scope; returns how many."""
    present = await kv.buckets(scope)
    deleted = 0
    for bucket in sorted(b for b in present if bucket_store(b) == store):
        deleted += await clear_bucket(kv, scope, bucket, present)
    return deleted
