"""statecore's data converter: pydantic JSON payloads, optionally passed through a codec, and
how the plugin fits it into a converter the user already configured.

Kept apart from ``statecore.temporal._encryption`` so the plugin can take any ``PayloadCodec``
without importing the optional ``cryptography`` package.
"""

from __future__ import annotations

import dataclasses
import functools

from temporalio.contrib.pydantic import (
    PydanticJSONPlainPayloadConverter,
    PydanticPayloadConverter,
)
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
    PayloadCodec,
)


class StatecorePayloadConverter(PydanticPayloadConverter):
    """pydantic's payload converter, the same payloads byte for byte, built without cost.

    Temporal builds a payload converter for every workflow activation. pydantic's builds a
    JSON converter each time, with a pydantic-core serializer and an empty cache of type
    adapters that the activation then fills again. All instances of this one share a single
    JSON converter (it holds no per-use state; its cache of type adapters is thread-safe),
    so an activation builds only the composite around it."""

    def __init__(self) -> None:
        CompositePayloadConverter.__init__(self, *_encoding_converters())


@functools.cache
def _encoding_converters() -> tuple[EncodingPayloadConverter, ...]:
    shared = PydanticJSONPlainPayloadConverter()
    return tuple(
        shared if isinstance(c, JSONPlainPayloadConverter) else c
        for c in DefaultPayloadConverter.default_encoding_payload_converters
    )


#: statecore's own data converter: pydantic's payloads, no codec.
STATECORE_DATA_CONVERTER = DataConverter(payload_converter_class=StatecorePayloadConverter)


def statecore_data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """The pydantic data converter, with ``codec`` applied to every payload when given.

    With a codec, failure messages and stack traces also move into an encoded payload: an
    error raised while handling a turn can quote what the turn contained."""
    if codec is None:
        return STATECORE_DATA_CONVERTER
    return dataclasses.replace(
        STATECORE_DATA_CONVERTER,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )


def adjust_data_converter(
    existing: DataConverter | None, codec: PayloadCodec | None = None
) -> DataConverter:
    """The user's data converter with statecore's payload format, keeping everything else.

    statecore's workflows and activities exchange pydantic models, so the payload converter
    must understand them: the default one is switched to pydantic's (statecore's
    ``StatecorePayloadConverter``, the same payloads); a pydantic one (or a subclass) is
    kept. The user's payload codec, failure converter and external storage stay
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
        changes["payload_converter_class"] = StatecorePayloadConverter
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
