"""One rule per kind of identifier, defined once.

The update validator, the client, the CLI, the turn API and every store backend check an
identifier through this table, so their limits cannot disagree: a turn id the validator
accepts into history is a turn id the store will write (a 129-character or ``turn:1`` turn id
used to pass the validator's key rule and then fail at the store's id rule, after the turn
was already in history). ``docs/limits.md`` shows the same table (a test compares them).

Identifiers reach SQL only as bound parameters, but they also appear in workflow ids, file
names and UI filters, so the alphabets are closed: no path separators, quotes, whitespace,
NUL or SQL punctuation. Plain identifiers never contain ':', the workflow id's separator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from statecore.core._errors import InvalidIdentifierError
from statecore.core._limits import MAX_ID_LENGTH, MAX_KEY_LENGTH


@dataclass(frozen=True)
class IdentifierRule:
    """What one alphabet of identifiers allows."""

    name: str
    max_length: int
    pattern: re.Pattern[str]
    #: The alphabet in words, for error messages and the docs.
    alphabet: str

    def check(self, value: Any, what: str) -> str:
        """Return ``value`` if it follows the rule, else raise InvalidIdentifierError."""
        if not isinstance(value, str) or not value:
            raise InvalidIdentifierError(f"{what} must be a non-empty string", value=repr(value))
        if len(value) > self.max_length:
            raise InvalidIdentifierError(
                f"{what} is {len(value)} characters; the limit is {self.max_length}",
                value=value[:40],
                limit=self.max_length,
            )
        if not self.pattern.match(value) or ".." in value:
            raise InvalidIdentifierError(
                f"{what} {value[:80]!r} may use only {self.alphabet} and may not contain '..'",
                value=value[:40],
            )
        return value


ID_RULE = IdentifierRule(
    name="identifier",
    max_length=MAX_ID_LENGTH,
    pattern=re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-@]*$"),
    alphabet="letters, digits and _ . - @, starting with a letter or digit,",
)
KEY_RULE = IdentifierRule(
    name="key",
    max_length=MAX_KEY_LENGTH,
    pattern=re.compile(r"^[A-Za-z0-9_.\-@:=+]+$"),
    alphabet="letters, digits and _ . - @ : = + (no '/', quotes, whitespace or NUL)",
)

#: Every kind of identifier statecore takes, and its rule. A turn id is a plain identifier:
#: the store keys messages by (session, turn_id, index) in a 128-character column.
IDENTIFIER_KINDS: dict[str, IdentifierRule] = {
    "namespace": ID_RULE,
    "agent_id": ID_RULE,
    "session_id": ID_RULE,
    "turn_id": ID_RULE,
    "task_id": ID_RULE,
    "task_queue": ID_RULE,
    "bucket": ID_RULE,
    "flow_id": ID_RULE,
    "step": ID_RULE,
    "tool": ID_RULE,
    "key": KEY_RULE,
}


def check_identifier(kind: str, value: Any, what: str | None = None) -> str:
    """Check ``value`` as an identifier of ``kind`` (a key of IDENTIFIER_KINDS)."""
    return IDENTIFIER_KINDS[kind].check(value, what or kind)


def validate_identifier(value: Any, what: str = "identifier") -> str:
    """Return ``value`` if it is a plain identifier (128 characters, ``[A-Za-z0-9_.-@]``)."""
    return ID_RULE.check(value, what)


def validate_key(value: Any) -> str:
    """Validate a KV key: like an identifier, plus ':', '=' and '+' for namespaced keys."""
    return KEY_RULE.check(value, "key")


def validate_turn_id(value: Any) -> str:
    """A turn id: the one rule the validator, the client, the turn API and the store share."""
    return check_identifier("turn_id", value)
