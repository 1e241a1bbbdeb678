"""statecore's data converter: pydantic JSON payloads, optionally passed through a codec, and
how the plugin fits it into a converter the user already configured.

Kept apart from ``statecore.encryption.codec`` so the plugin can take any ``PayloadCodec`` without
importing the optional ``cryptography`` package.
"""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
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


def adjust_data_converter(
    existing: DataConverter | None, codec: PayloadCodec | None = None
) -> DataConverter:
    """The user's data converter with statecore's payload format, keeping everything else.

    statecore's workflows and activities exchange pydantic models, so the payload converter
    must understand them: the default one is switched to pydantic's; a pydantic one (or a
    subclass) is kept. The user's payload codec, failure converter and external storage stay
    as they are. ``codec`` (the plugin's own) is applied only when the user has none; with it,
    failure messages move into encoded attributes too, unless the user chose a failure
    converter of their own.

    Raises:
        ValueError: the user's payload converter is a custom one that is not pydantic's
            (statecore cannot tell whether it handles its models), or both the user and the
            plugin bring a codec (one would silently win).
    """
    base = existing if existing is not None else DataConverter.default
    changes: dict[str, object] = {}
    converter_class = base.payload_converter_class
    if not issubclass(converter_class, PydanticPayloadConverter):
        if converter_class is not DefaultPayloadConverter:
            raise ValueError(
                f"statecore needs a payload converter that handles pydantic models; the "
                f"configured {converter_class.__qualname__} is neither temporalio's default "
                "nor a PydanticPayloadConverter. Subclass "
                "temporalio.contrib.pydantic.PydanticPayloadConverter for your own converter"
            )
        changes["payload_converter_class"] = PydanticPayloadConverter
    if codec is not None:
        if base.payload_codec is not None:
            raise ValueError(
                "both the client's data converter and StatecorePlugin(codec=...) carry a "
                "payload codec; pass it in one place (keep yours and drop codec=, or the "
                "reverse)"
            )
        changes["payload_codec"] = codec
        if base.failure_converter_class is DefaultFailureConverter:
            changes["failure_converter_class"] = DefaultFailureConverterWithEncodedAttributes
    return dataclasses.replace(base, **changes) if changes else base  # type: ignore[arg-type]
