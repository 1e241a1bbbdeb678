"""statecore's data converter: pydantic JSON payloads, optionally passed through a codec.

Kept apart from ``statecore.encryption.codec`` so the plugin can take any ``PayloadCodec`` without
importing the optional ``cryptography`` package.
"""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)


def statecore_data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """The pydantic data converter, with ``codec`` applied to every payload when given.

    With a codec, failure messages and stack traces also move into an encoded payload: an
    error raised while handling a turn can quote what the turn contained."""
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
