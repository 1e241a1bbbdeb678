"""Activity inputs as statecore's own workflow sent them.

The turn activities take their input raw and decode it here with the CARRIED validation
context: the workflow built it from requests checked where they entered, so the message text
is not scanned again on its way to the store, which checks what it writes
(docs/architecture.md, "The path of one turn"). Every other rule of the models still holds.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel
from temporalio import activity
from temporalio.common import RawValue

from statecore.core._models import CARRIED

M = TypeVar("M", bound=BaseModel)

#: The encoding Temporal's JSON payload converter writes in a payload's metadata.
_JSON = b"json/plain"


def decode_carried(model: type[M], raw: RawValue | M) -> M:
    """``raw`` (a payload of JSON, as the workflow encoded it) as ``model``. A payload in
    another encoding goes through the worker's payload converter, with every check."""
    if isinstance(raw, model):
        return raw  # called in process, with the model itself
    if not isinstance(raw, RawValue):
        raise TypeError(f"expected a {model.__name__} payload, got {type(raw).__name__}")
    payload = raw.payload
    if payload.metadata.get("encoding") == _JSON:
        return model.model_validate_json(payload.data, context=CARRIED)
    decoded: M = activity.payload_converter().from_payload(payload, model)
    return decoded
