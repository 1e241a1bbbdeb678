"""Every limit statecore enforces, in one place.

docs/limits.md's table is built from these (``python -m tests.limits_table``); each limit
says why it is what it is. A limit is checked where data enters and where it is stored, by
the modules that import it from here.
"""

from __future__ import annotations

# --- identifiers ---------------------------------------------------------------------------------

#: An id is part of a workflow id, a search attribute and an indexed column: short enough
#: for all three.
MAX_ID_LENGTH = 128
#: KV keys carry the caller's own structure (``user:42:profile``), so they get more room.
MAX_KEY_LENGTH = 512

# --- stored data ---------------------------------------------------------------------------------

#: Temporal's payload hard limit is 2 MiB; one message must leave room for the rest of a turn.
MAX_MESSAGE_BYTES = 512 * 1024
#: One scoped-state or flow document, serialised as JSON: Agentex's promise of 16 MB of
#: state per (task, agent). A turn reads and writes it through local activities whose
#: payloads over the blob threshold are stored in statecore's database with a claim in history
#: (``StatecorePlugin(blob_threshold_bytes=...)``, docs/large_values.md); without that a turn
#: reads back at most MAX_INLINE_VALUE_BYTES.
MAX_STATE_BYTES = 16 * 1024 * 1024
#: One KV value (JSON as encoded, bytes as given): the same 16 MiB as a document, for the
#: same reason, read through the turn API the same way.
MAX_KV_VALUE_BYTES = 16 * 1024 * 1024
#: The most a turn reads back as one inline payload (a document or a KV value) when the
#: worker does not store large payloads by reference: Temporal fails a workflow task whose
#: payload is over 2 MiB, and history keeps what a turn read (a 16 MB read would fill a
#: third of a run's 50 MB). Over it the read is refused with StateTooLarge/ContentTooLarge.
MAX_INLINE_VALUE_BYTES = 1024 * 1024
#: Rows one read returns at most (list calls page past it).
MAX_PAGE_SIZE = 1000
#: A session idle this long closes; its state is kept or deleted by policy.
DEFAULT_SESSION_TTL_SECONDS = 24 * 3600
#: How many distinct tools ``recently_used_tools`` remembers (most recent last).
MAX_RECENT_TOOLS = 20

# --- memory profiles -----------------------------------------------------------------------------

#: No model's window comes near this; a larger limit is a typo, not a configuration.
MAX_TOKEN_LIMIT = 10_000_000

# --- context budgets -----------------------------------------------------------------------------

#: The budget of a session whose model's window is unknown.
DEFAULT_CONTEXT_BUDGET = 4096
#: Room left for the reply: a quarter of the window, at most this many tokens.
MAX_REPLY_RESERVE = 4096

# --- the change feed -----------------------------------------------------------------------------

#: Longest detail an event stores, as JSON (ids and sizes only; anything longer is a bug).
MAX_DETAIL_BYTES = 4096

# --- sessions and turns --------------------------------------------------------------------------

#: Continue-as-new well before the server's 2,000-updates-per-run ceiling.
DEFAULT_MAX_TURNS_PER_RUN = 1000
#: The most a session may ask for: each turn is one update, and the server refuses more than
#: 2,000 updates in one run.
MAX_TURNS_PER_RUN = 1900
#: Attempts of one model call before its turn fails (SessionInput.model_attempts): about
#: 2.5 minutes of backoff from 1 s to 30 s, then the turn fails typed and the session goes on.
DEFAULT_MODEL_ATTEMPTS = 10
#: A session that has taken turns and then hears nothing for this long continues as new, so
#: its next turn, on a worker that no longer caches it, replays an almost empty run instead of
#: everything since the run began (docs/operators.md, "Idle sessions start a new run").
DEFAULT_IDLE_CONTINUE_SECONDS = 60
#: ... but only once its run holds this many history events (~18 turns): a shorter run
#: replays in milliseconds, and continuing as new after every short conversation would cost
#: the server a new run each time (bench/README.md, "Open sessions: the uncached turn").
DEFAULT_IDLE_CONTINUE_MIN_EVENTS = 200
#: A whole ``send_message`` request as JSON (content, name and metadata, escapes included).
#: The message travels twice in the model activity's input (the context's pending message
#: and the commit), and Temporal fails a workflow task whose command carries over 2 MiB:
#: the client and the validator both refuse larger requests.
MAX_TURN_REQUEST_BYTES = MAX_MESSAGE_BYTES + 64 * 1024

# --- numbers callers pass to the store -----------------------------------------------------------

#: No model has a context window anywhere near this; a bigger budget is a bug in the caller.
MAX_TOKEN_BUDGET = 100_000_000
#: About 68 years; fits a signed 32-bit column in every dialect.
MAX_TTL_SECONDS = 2**31 - 1
#: Messages one turn may carry (indexes 0..MAX_TURN_MESSAGES-1).
MAX_TURN_MESSAGES = 10_000
#: Upper bound for counters supplied by callers (token usage, sequence indexes, seqs).
MAX_COUNTER = 2**53
#: Largest token count one add_token_usage call may report.
MAX_TOKENS_PER_CALL = 10**12

# --- activity inputs -----------------------------------------------------------------------------

#: Temporal fails a workflow task (again on every retry) whose command carries payloads over
#: 2 MiB; the model activity's input is refused before that with ContentTooLarge.
MAX_ACTIVITY_INPUT_BYTES = 2 * 1024 * 1024 - 64 * 1024

# --- requests to Temporal ------------------------------------------------------------------------

#: Temporal's default payload size limit (the server's ``limit.blobSize.error``). A server
#: configured lower needs ``AgentSessionClient(payload_limit_bytes=...)`` to match.
DEFAULT_PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024
#: gRPC's default message limit: one request (update-with-start carries the session's input
#: and the turn) must fit in it as a whole.
GRPC_MESSAGE_LIMIT_BYTES = 4 * 1024 * 1024
#: Below this no session input fits; a smaller setting is a mistake, not a configuration.
MIN_PAYLOAD_LIMIT_BYTES = 64 * 1024

# --- streamed replies (docs/streaming.md) -----------------------------------------------------

#: Characters of a running turn's reply its stream row holds at most. The row is rewritten
#: whole at each flush, so its size bounds what one flush writes; a reply past it (a message
#: may reach MAX_MESSAGE_BYTES) stops growing in the row, and readers take the rest from the
#: committed turn.
MAX_STREAM_TEXT_CHARS = 64 * 1024
#: Tool calls a running turn's stream row holds at most (the rest arrive with the commit).
MAX_STREAM_TOOL_CALLS = 64
#: Shortest pause between two writes of one turn's stream row. The first delta is written at
#: once (time to first token); the deltas that arrive during a write and this pause go out
#: together in the next one, so a model emitting hundreds of tokens a second costs at most
#: this many writes a second, and the model never waits for one.
DEFAULT_STREAM_FLUSH_SECONDS = 0.02
#: How often a reader on a database that cannot push (SQLite, MariaDB) reads the stream row
#: again. A primary-key read; PostgreSQL readers are woken by NOTIFY instead and read this
#: often only as a fallback for a dropped listener (STREAM_PUSH_FALLBACK_SECONDS).
DEFAULT_STREAM_POLL_SECONDS = 0.01
#: A PostgreSQL reader's longest wait between reads when no NOTIFY arrives.
STREAM_PUSH_FALLBACK_SECONDS = 1.0
#: Longest a write of a stream row may take before the writer gives up streaming for the
#: attempt (the turn goes on; readers get the rest of the reply from its commit).
STREAM_WRITE_TIMEOUT_SECONDS = 5.0
#: Longest a reader follows one turn by default: as long as the model call's start-to-close
#: timeout lets one attempt run, with room for a retry.
DEFAULT_STREAM_READ_SECONDS = 15 * 60
#: Shortest and longest poll interval (and writer's flush interval) a caller may set: below
#: 1 ms a reader spins on the database; above a minute it is no longer a stream.
MIN_STREAM_POLL_SECONDS = 0.001
MAX_STREAM_POLL_SECONDS = 60.0
# --- payloads stored by reference ----------------------------------------------------------------

#: A payload this large or larger is stored in statecore's database and history keeps a
#: claim (about 200 bytes): temporalio's own default, an eighth of the 2 MiB payload limit,
#: so a workflow task of several such payloads stays far below it.
DEFAULT_BLOB_THRESHOLD_BYTES = 256 * 1024
#: The largest payload one blob holds: a 16 MiB document or KV value, JSON-escaped or in
#: base64 (4/3), inside its envelope and the codec's, with room to spare. A larger payload is
#: refused with BlobTooLarge rather than sent to the database in one statement.
MAX_BLOB_BYTES = 32 * 1024 * 1024
#: The sweep leaves a blob stored for a workflow this recently (or stored with no workflow),
#: however the workflow looks: a client stores a start's input before the server has heard
#: of the workflow, and a worker stores a workflow task's payloads before it completes.
BLOB_SWEEP_GRACE_SECONDS = 3600
#: Blobs kept compressed only when zlib saves at least this share of their bytes (encrypted
#: payloads do not compress, and reading them back should not pay for an inflate that gains
#: nothing).
BLOB_MIN_COMPRESSION_SAVING = 0.1
