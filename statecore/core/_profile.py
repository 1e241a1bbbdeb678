"""A session's memory profile: how much context it gets and when it is summarized.

Kept apart from context assembly so the workflow side (the operator contract's input) can use
it without loading the tokenizer or the store.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator, model_validator

from statecore.core._errors import InvalidLimitError, UnknownStrategyError
from statecore.core._limits import MAX_TOKEN_LIMIT
from statecore.core._models import StatecoreModel


def check_limit(value: Any, what: str, *, maximum: int = MAX_TOKEN_LIMIT, minimum: int = 1) -> int:
    """Return ``value`` if it is an int in ``minimum..maximum``, else raise InvalidLimitError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidLimitError(
            f"{what} must be a whole number, not {value!r}", value=repr(value)[:80]
        )
    if not minimum <= value <= maximum:
        raise InvalidLimitError(
            f"{what} is {value}; use a value from {minimum} to {maximum}",
            value=value,
            maximum=maximum,
        )
    return value


class SessionProfile(StatecoreModel):
    """A session's memory profile: how much context a session gets and when it is summarized."""

    type: Literal["rolling_window"] = "rolling_window"
    #: Tokens the assembled context may hold (reply priming included). None: the model's
    #: context window less room for the reply (statecore.core._model_windows).
    max_tokens: int | None = None
    #: Once the window holds more tokens than this, its oldest part is folded into the summary.
    summarization_threshold: int = 3000

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> Any:
        if v != "rolling_window":
            raise UnknownStrategyError(
                f"memory type {v!r} is not supported; use 'rolling_window'", value=repr(v)
            )
        return v

    @field_validator("max_tokens", "summarization_threshold", mode="before")
    @classmethod
    def _limits(cls, v: Any, info: Any) -> int | None:
        if v is None and info.field_name == "max_tokens":
            return None
        return check_limit(v, info.field_name)

    @model_validator(mode="after")
    def _threshold_fits(self) -> SessionProfile:
        if self.max_tokens is not None and self.summarization_threshold > self.max_tokens:
            raise InvalidLimitError(
                f"summarization_threshold ({self.summarization_threshold}) is above max_tokens "
                f"({self.max_tokens}); summarize before the window can fill the context"
            )
        return self
