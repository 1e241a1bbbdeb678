"""What the module objects of one SQL transaction share: the connection, the transaction's
timestamp, the token counter, and the session header rows it has read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from statecore.core._errors import SessionNotFoundError, StatecoreError, StateTooLargeError
from statecore.core._limits import MAX_STATE_BYTES
from statecore.core._models import SessionRef
from statecore.core._tokens import TokenCounter
from statecore.store._base import RestartTransaction
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._header_memo import Along, DeferredTurn, HeaderMemo, HeaderMemos
from statecore.store.sql._session_header import (
    HAS_HINTS,
    HAS_TURN_MESSAGES,
    SESSION_COLUMNS,
    SNAPSHOT_IS_CURRENT,
    TURN_RECORD,
    SessionRow,
    lock_session_for_turn_statement,
    lock_session_statement,
    select_session,
    select_session_for_turn,
    select_session_for_turn_with_window,
    turn_params,
    update_session_returning_base,
    update_session_statement,
    window_rows,
)
from statecore.store.sql._transaction_memory import TransactionMemory
from statecore.store.sql._window_cache import SessionKey, WindowCache


class SqlContext(TransactionMemory):
    """One open transaction. Store functions run their statements here and never commit:
    ``SqlStateStore.transaction()`` commits or rolls back the whole block."""

    def __init__(
        self,
        conn: AsyncConnection,
        now: datetime,
        counter: TokenCounter,
        default_ttl: int,
        max_packet: int | None = None,
        windows: WindowCache | None = None,
        *,
        read_only: bool = False,
        memos: HeaderMemos | None = None,
    ) -> None:
        super().__init__()
        self._conn = conn
        self._read_only = read_only
        #: The store's header memos (PostgreSQL, transactions that may write): see
        #: ``defer_turn`` and ``settle_memos``.
        self._memos = memos
        # The turn commit held back by ``defer_turn``, if any.
        self._deferred: DeferredTurn | None = None
        # Header rows this transaction wrote, by primary key; the row version's xmin where
        # an append learnt it; the sessions whose turn this transaction committed.
        self._written_headers: set[int] = set()
        self._header_xmins: dict[int, str] = {}
        self._finished_turns: set[SessionKey] = set()
        self.now = now
        self.counter = counter
        self.default_ttl = default_ttl
        #: MariaDB/MySQL's max_allowed_packet; None where statements have no such cap.
        self.max_packet = max_packet
        #: The store's cache of context windows; only read-only transactions get it.
        self.windows = windows
        self.open = True
        # The driver that runs prebuilt statements directly on SQLite and PostgreSQL (see
        # _prebuilt_statements), decided at the first statement: False until then, None where
        # SQLAlchemy runs them all.
        self._driver: prebuilt_statements.Driver | bool | None = False
        # A read-only block whose plain reads need no server transaction (prebuilt_statements.run).
        self._reads_outside = False

    @property
    def conn(self) -> AsyncConnection:
        """The connection, for a statement: a turn held back for one statement
        (``defer_turn``) is given up first, as that statement must carry all its writes."""
        self._check_open()
        if self._deferred is not None:
            raise self._give_up_deferred("a statement was needed before the turn's last writes")
        return self._conn

    def _check_open(self) -> None:
        if not self.open:
            raise StatecoreError(
                "this transaction has ended; its module objects are valid only inside their "
                "'async with store.transaction()' block. Open a new transaction"
            )

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        """``conn.execute(statement, parameters)``; a prebuilt statement skips SQLAlchemy's
        execution where that changes nothing anyone sees (see ``_prebuilt_statements``)."""
        conn = self.conn
        driver = self._driver
        if driver is False:
            driver = self._driver = prebuilt_statements.driver_for(conn)
            self._reads_outside = self._read_only and prebuilt_statements.reads_committed(
                driver, conn
            )
        return await prebuilt_statements.run(
            conn,
            driver,  # type: ignore[arg-type]
            statement,
            parameters,
            read_only=self._reads_outside,
        )

    @property
    def dialect(self) -> str:
        """The SQLAlchemy dialect name of the connection ('sqlite', 'postgresql', 'mysql')."""
        return self._conn.dialect.name

    async def session_row(self, ref: SessionRef, *, lock: bool = False) -> SessionRow:
        """The session's header row; ``lock`` takes its row lock until commit (writers that
        update the session's counters serialise here). SessionNotFoundError if absent."""
        row = await self.find_session_row(ref, lock=lock)
        if row is None:
            raise SessionNotFoundError(
                f"session {ref} does not exist; call sessions.ensure(ref) first",
                session=str(ref),
            )
        return row

    async def find_session_row(self, ref: SessionRef, *, lock: bool = False) -> SessionRow | None:
        """The session's header row, or None if it does not exist.

        A row this transaction already read is answered from memory when it cannot have
        changed since: on SQLite every transaction holds the database's write lock from its
        BEGIN, and elsewhere a row this transaction locked stays as it left it. An unlocked
        read on PostgreSQL or MariaDB is reused for unlocked reads only (one consistent view
        of the header per transaction); asking for the lock reads it again under the lock."""
        return await self._session_row((ref.namespace, ref.agent_id, ref.session_id), lock)

    async def _session_row(self, key: SessionKey, lock: bool) -> SessionRow | None:
        self._check_open()  # refuses once the transaction has ended, cached row or not
        cached = self._session_rows.get(key)
        if cached is not None and (not lock or self._holds(key)):
            return cached
        namespace, agent_id, session_id = key
        params = {"p_namespace": namespace, "p_agent_id": agent_id, "p_session_id": session_id}
        found = (await self.execute(select_session(lock), params)).first()
        if found is None:
            self._session_rows.pop(key, None)
            return None
        row = self.keep_session_row(key, found._mapping)
        if lock:
            self.note_session_locked(*key)
        return row

    async def read_for_turn(self, ref: SessionRef, turn_id: str) -> str | None:
        """The stored record of ``turn_id`` (None if the turn never committed, or the
        session does not exist), read with what a turn reads next in the same statement:
        the session's header row, kept as an unlocked read, whether it has any hints, so a
        turn of a session without hints does not list them (``has_no_hints``), and, on a
        server database when this process holds a window of the session, the rows from that
        window's newest message on, which the window read then takes (``prefetched_window``)."""
        params: dict[str, Any] = turn_params(ref, turn_id)
        key = (ref.namespace, ref.agent_id, ref.session_id)
        # On SQLite the transaction holds the write lock (or its snapshot) from here on,
        # so whether the turn has messages yet stays true until it writes some itself.
        on_sqlite = self.dialect == "sqlite"
        # The window's rows ride along only where a statement is a round trip to a server:
        # on SQLite the two reads run in this process, and the joined one costs more
        # (45 us against 11 + 20 us, bench/README.md at 74815d7, "A turn's context read in
        # one statement").
        windows = None if on_sqlite else self.windows
        anchor = windows.anchor_for(key) if windows is not None else None
        if anchor is None:
            found = (await self.execute(select_session_for_turn(on_sqlite), params)).first()
        else:
            # The window this process read last for the session: its rows from the anchor
            # on come along (``prefetched_window``), one row each beside the header's.
            params |= {"p_window_pk": anchor[0], "p_window_from": anchor[1]}
            statement = select_session_for_turn_with_window()
            rows = (await self.execute(statement, params)).all()
            found = rows[0] if rows else None
            if found is not None and found.id == anchor[0]:
                self._prefetched[found.id] = (anchor[1], window_rows(rows))
        if found is None:
            return None  # no such session, so no such turn
        columns = found._mapping
        row = self.keep_session_row(key, columns)
        if columns[HAS_HINTS]:
            self._hintless.discard(row.id)
        else:
            self._hintless.add(row.id)
        if on_sqlite and not columns[HAS_TURN_MESSAGES]:
            self._turns_without_messages.add((row.id, turn_id))
        record: str | None = columns[TURN_RECORD]
        return record

    async def find_session_for_turn(self, ref: SessionRef, turn_id: str) -> SessionRow | None:
        """``find_session_row(ref, lock=True)`` before a commit of turn ``turn_id``. Where the
        locked read can tell for certain, it also learns whether the turn has messages
        (``turn_has_no_messages``), so the append that follows need not look them up: on
        SQLite, whose transaction holds the write lock from its first statement, and on
        PostgreSQL when no other transaction changed the header between the statement's
        snapshot and its lock. Every transaction that writes a session's messages updates
        its header row under that lock, so an unchanged header means the snapshot holds
        all of them. When the lock waited for such a writer, the row read is the writer's
        newer version (a ``FOR UPDATE`` rereads only the row it locks) while the
        ``EXISTS`` saw the older snapshot: the two versions differ, and the answer is not
        used."""
        key = (ref.namespace, ref.agent_id, ref.session_id)
        dialect = self.dialect
        if dialect not in ("sqlite", "postgresql") or (
            key in self._session_rows and self._holds(key)
        ):
            return await self.find_session_row(ref, lock=True)
        self._check_open()
        params = turn_params(ref, turn_id)
        statement = lock_session_for_turn_statement(dialect == "postgresql")
        found = (await self.execute(statement, params)).first()
        if found is None:
            self._session_rows.pop(key, None)
            return None
        columns = found._mapping
        row = self.keep_session_row(key, columns)
        self.note_session_locked(*key)
        certain = dialect == "sqlite" or columns[SNAPSHOT_IS_CURRENT]
        if certain and not columns[HAS_TURN_MESSAGES]:
            self._turns_without_messages.add((row.id, turn_id))
        return row

    def defer_turn(self, ref: SessionRef, turn_id: str) -> bool:
        """Start a turn commit that only appends messages before its last writes
        (``StoreTransaction.begin_turn``'s ``messages_only``) from the session's header memo,
        sending nothing: True when it did. The memo answers for the locked read; the append
        and the turn's last writes are held back and sent as one statement outside any
        server transaction (``_turn_commit``), which writes nothing unless the
        header is still the version the memo names.

        Only on PostgreSQL at READ COMMITTED (where that one statement, waiting for the
        header's row lock, checks the row's newest version), and only as this transaction's
        first work: anything it had sent would have begun a server transaction."""
        memos = self._memos
        if memos is None or self._driver is not False or self._session_rows:
            return False
        if not _reads_committed(self._conn):
            return False
        key = (ref.namespace, ref.agent_id, ref.session_id)
        memo = memos.take(key)
        if memo is None:
            return False
        row = self.keep_session_row(key, memo.columns)
        self.note_session_locked(*key)
        # Checked by the statement: the turn's (session, turn, index) key is unique.
        self._turns_without_messages.add((row.id, turn_id))
        self._deferred = DeferredTurn(key, row.id, memo)
        return True

    def deferred_turn(self, ref: SessionRef) -> DeferredTurn | None:
        """The held-back commit of ``ref``'s turn, once its append has run (``defer_turn``)."""
        deferred = self._deferred
        if deferred is None or deferred.header is None:
            return None
        if deferred.key != (ref.namespace, ref.agent_id, ref.session_id):
            return None
        return deferred

    async def send_deferred(self, statement: Any, parameters: dict[str, Any]) -> Any:
        """Send the held-back turn's one statement, outside any server transaction: it
        commits on its own when it succeeds. Any failure gives the turn up
        (``RestartTransaction``): the statement wrote nothing, and the turn runs again the
        usual way."""
        deferred = self._deferred
        assert deferred is not None
        self._check_open()
        driver = self._driver
        if driver is False:
            driver = self._driver = prebuilt_statements.driver_for(self._conn)
        try:
            found = await prebuilt_statements.run(
                self._conn,
                driver,  # type: ignore[arg-type]
                statement,
                parameters,
                autocommit=True,
            )
            row = found.first()
        except Exception as error:
            why = f"its one statement failed ({type(error).__name__})"
            raise self._give_up_deferred(why) from error
        self._deferred = None
        self._header_xmins[deferred.pk] = row.xmin
        return row

    def _give_up_deferred(self, why: str) -> RestartTransaction:
        """Give up the held-back turn, for the caller to raise: nothing of it was written,
        and its memo is gone, so the turn runs again from the start the usual way."""
        deferred, self._deferred = self._deferred, None
        assert deferred is not None
        return RestartTransaction(
            f"the commit of a turn of session {'/'.join(deferred.key)} runs again with the "
            f"header's lock: {why}"
        )

    def turn_finished(self, ref: SessionRef) -> None:
        """Note that this transaction committed a turn of ``ref`` (``settle_memos``)."""
        self._finished_turns.add((ref.namespace, ref.agent_id, ref.session_id))

    def settle_memos(self) -> None:
        """Once this transaction has committed: a memo for each session whose turn it
        committed with what it learnt of the header (its version, the window's base), and
        none for a header it wrote otherwise."""
        memos = self._memos
        if memos is None:
            return
        for key, row in self._session_rows.items():
            if row.id not in self._written_headers:
                continue
            memo = self._memo_of(key, row)
            if memo is None:
                memos.drop(key)
            else:
                memos.put(key, memo)

    def _memo_of(self, key: SessionKey, row: SessionRow) -> HeaderMemo | None:
        xmin = self._header_xmins.get(row.id)
        known = self._window_bases.get(row.id)
        if key not in self._finished_turns or xmin is None or known is None:
            return None
        start, base = known
        if start != row.window_start_seq:
            return None
        columns = {name: getattr(row, name) for name in SESSION_COLUMNS}
        return HeaderMemo(columns=columns, xmin=xmin, window_start=start, window_base=base)

    def _holds(self, key: SessionKey) -> bool:
        return self.dialect == "sqlite" or key in self._sessions_locked

    async def update_session(self, row: SessionRow, /, **values: Any) -> None:
        """Write ``values`` to the session's header row and to this transaction's copy of it.
        Every change to a header row goes through here (or ``append_to_log``), so the copy
        never goes stale."""
        values = self._header_values(row, values)
        # Nor which turns have no messages: a restore writes them without an append.
        self._turns_without_messages = {
            seen for seen in self._turns_without_messages if seen[0] != row.id
        }
        await self._write_header(row.id, values)
        for name, value in values.items():
            setattr(row, name, value)

    async def append_to_log(
        self,
        row: SessionRow,
        appended: Sequence[Mapping[str, Any]],
        along: Along | None,
        /,
        **counters: Any,
    ) -> None:
        """``update_session`` for an append: ``counters`` are the log's new counters,
        ``appended`` the rows just written (ascending ``seq``), sent before this on SQLite
        and MariaDB or ``along`` this UPDATE on PostgreSQL: a prebuilt builder of
        a data-modifying CTE and its bind parameters, sent in the header's UPDATE statement,
        one round trip for both. It must not touch the header row, and reads none of the
        UPDATE's changes (one statement, one snapshot).

        Where an UPDATE can return rows (SQLite, PostgreSQL) the same statement also
        returns the running token total before the window's first message, which the
        turn's commit reports next (``window_base``): one statement fewer per turn. Its
        subquery sees the log as it stood when the statement began, after this
        transaction took the header's lock (so every other append to the session has
        committed or waits), without the rows a CTE of the same statement inserts: when
        it finds none, the first appended row at or after the window start is the
        window's first message."""
        if along is not None and self.dialect != "postgresql":
            raise ValueError("a write along the header's UPDATE needs PostgreSQL")
        deferred = self._deferred
        values = self._header_values(row, counters)
        start = row.window_start_seq
        base: int | None = None
        if deferred is not None and deferred.pk == row.id and deferred.header is None:
            # Held back for the turn's one statement, which checks that the window's base
            # is still the memo's.
            if along is None:
                raise self._give_up_deferred("its append carries no messages")
            deferred.header, deferred.along = values, along
            self._written_headers.add(row.id)
            base = deferred.memo.window_base
        elif self.dialect not in ("sqlite", "postgresql"):
            await self._write_header(row.id, values)
        else:
            build, extra = along if along is not None else (None, {})
            on_postgresql = self.dialect == "postgresql"
            found = (
                await self._write_header(
                    row.id,
                    values,
                    lambda names: update_session_returning_base(names, build, on_postgresql),
                    {"p_window_from": start, **extra},
                )
            ).first()
            if found is not None:
                base = found.window_base
                if on_postgresql:
                    self._header_xmins[row.id] = found.xmin
        if self.dialect in ("sqlite", "postgresql"):
            if base is None:
                base = next(
                    (m["cumulative_tokens"] - m["tokens"] for m in appended if m["seq"] >= start),
                    None,
                )
            self._window_bases[row.id] = (start, base)
        for name, value in values.items():
            setattr(row, name, value)

    async def send_touches(self) -> None:
        """Send the header values ``touch_session`` held back (before commit, and before a
        statement that reads them)."""
        while self._touches:
            pk, values = self._touches.popitem()
            await self._write_header(pk, values)

    async def _write_header(
        self,
        pk: int,
        values: dict[str, Any],
        statement: Callable[[tuple[str, ...]], Update] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Any:
        """Send ``values`` to the header row ``pk`` with ``statement(names)`` (an UPDATE of
        those columns, bind parameters ``v_<name>`` and ``p_id``, plus ``extra``;
        ``update_session_statement`` by default)."""
        build = statement or update_session_statement
        self._written_headers.add(pk)
        params = {f"v_{name}": value for name, value in values.items()}
        return await self.execute(
            build(tuple(sorted(values))), {"p_id": pk, **params, **(extra or {})}
        )

    async def lock_session(self, namespace: str, agent_id: str, session_id: str) -> None:
        """Lock the session's header row, if the session exists, before writing rows it
        owns that are not reached through it (KV entries, the scoped-state document).

        The lock order of the SQL backend is: a session's header row, then its rows. Appends,
        flow, orchestration and deletes start at the header already; with KV and scoped-state
        writes starting there too, two transactions that touch one session's rows in
        different orders queue on the header instead of deadlocking on the rows. A session
        that does not exist yet has no row to lock (see ``run_transaction``)."""
        scope = (namespace, agent_id, session_id)
        # SQLite: BEGIN IMMEDIATE already made this the only writer.
        if self._holds(scope):
            return
        # The lock alone: a KV or scoped-state write needs none of the header's fields, and
        # reading the whole row (and building its copy) costs a standalone KV put more than
        # the lock. A copy read earlier without the lock may be stale: dropped, so a later
        # read in this transaction reads the header afresh under the lock it now holds.
        self._session_rows.pop(scope, None)
        params = {"p_namespace": namespace, "p_agent_id": agent_id, "p_session_id": session_id}
        await self.execute(lock_session_statement(), params)
        self._sessions_locked.add(scope)

    def check_fits_statement(self, document: str, what: str) -> None:
        """Refuse a document the server would reject as one oversized statement.

        MariaDB/MySQL drop a statement over ``max_allowed_packet`` (16 MiB by default on
        MariaDB, 1 MiB when set low) with an OperationalError that a retry can never
        fix, so it becomes a typed error here, before anything is sent."""
        if self.max_packet is None:
            return
        raw = document.encode("utf-8")
        # The driver sends values inline, escaping quotes and backslashes.
        size = len(raw) + raw.count(b'"') + raw.count(b"\\") + raw.count(b"'") + 4096
        if size > self.max_packet:
            raise StateTooLargeError(
                f"{what} is {len(raw)} bytes, more than this MariaDB/MySQL server accepts in "
                f"one statement (max_allowed_packet = {self.max_packet}). Raise the server's "
                "max_allowed_packet to 64M (the MySQL 8 default) to store documents up to the "
                f"{MAX_STATE_BYTES}-byte limit",
                size=len(raw),
                limit=self.max_packet,
            )

    async def insert_unless_duplicate(
        self, statement: Any, parameters: dict[str, Any] | None = None
    ) -> bool:
        """Run an INSERT (with ``parameters`` for its bind parameters) in a savepoint; False
        (and nothing written) if it hit a unique key.

        The savepoint keeps the transaction usable after the violation, which PostgreSQL
        would otherwise abort."""
        try:
            async with self.conn.begin_nested():
                await self.conn.execute(statement, parameters)
        except IntegrityError:
            return False
        return True


def _reads_committed(conn: AsyncConnection) -> bool:
    """Whether ``conn`` is a PostgreSQL connection whose transactions run at READ COMMITTED,
    whether or not its statements may skip SQLAlchemy's execution (``_prebuilt_statements``)."""
    sync = conn.sync_connection
    if sync is None or conn.dialect.name != "postgresql":
        return False
    adapter = sync.connection.dbapi_connection
    return prebuilt_statements.reads_committed(adapter, conn)  # type: ignore[arg-type]
