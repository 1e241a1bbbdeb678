"""AES-256-GCM payload codec: round trips, key rotation, tampering, unknown keys, key parsing."""

from __future__ import annotations

import base64

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes

from statecore.contract._session import SendMessageInput
from statecore.core._errors import PayloadDecryptionError, UnknownEncryptionKeyError
from statecore.temporal._converter import STATECORE_DATA_CONVERTER, statecore_data_converter
from statecore.temporal._encryption import (
    ENCODING,
    KEY_ID_METADATA,
    EncryptionCodec,
    Keyring,
    encrypted_data_converter,
    generate_key,
    parse_key_material,
)

SECRET = "the vault code is 7-4-1-9-zebra"
# Fixed keys: parametrized test ids embed them, and every pytest-xdist worker must collect the
# same ids (generate_key() has a test of its own).
KEY_A = base64.b64encode(bytes(range(32))).decode()
KEY_B = base64.b64encode(bytes(range(32, 64))).decode()


def json_payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=f'"{text}"'.encode())


async def test_round_trip_restores_data_and_metadata() -> None:
    codec = EncryptionCodec(Keyring([("k1", KEY_A)]))
    original = [json_payload(SECRET), Payload(metadata={"encoding": b"binary/null"})]
    encoded = await codec.encode(original)
    for sealed in encoded:
        assert sealed.metadata["encoding"] == ENCODING
        assert sealed.metadata[KEY_ID_METADATA] == b"k1"
        assert b"json/plain" not in sealed.data  # the inner encoding is sealed too
    assert SECRET.encode() not in encoded[0].SerializeToString()
    assert await codec.decode(encoded) == original


async def test_every_payload_gets_a_fresh_nonce() -> None:
    codec = EncryptionCodec(Keyring([("k1", KEY_A)]))
    first, second = await codec.encode([json_payload(SECRET), json_payload(SECRET)])
    assert first.data[:12] != second.data[:12]
    assert first.data != second.data


async def test_rotation_old_payloads_decrypt_and_new_writes_use_the_newest_key() -> None:
    old_codec = EncryptionCodec(Keyring([("2024", KEY_A)]))
    [written_before] = await old_codec.encode([json_payload(SECRET)])

    rotated = EncryptionCodec(Keyring([("2024", KEY_A), ("2025", KEY_B)]))
    [written_after] = await rotated.encode([json_payload("after rotation")])

    assert written_before.metadata[KEY_ID_METADATA] == b"2024"
    assert written_after.metadata[KEY_ID_METADATA] == b"2025"
    assert await rotated.decode([written_before, written_after]) == [
        json_payload(SECRET),
        json_payload("after rotation"),
    ]
    # A worker not yet given the new key cannot read new writes, and says which key it lacks.
    with pytest.raises(UnknownEncryptionKeyError, match="'2025'"):
        await old_codec.decode([written_after])


async def test_unknown_key_id_is_an_error_not_ciphertext_passed_on() -> None:
    [sealed] = await EncryptionCodec(Keyring([("k1", KEY_A)])).encode([json_payload(SECRET)])
    stranger = EncryptionCodec(Keyring([("k2", KEY_B)]))
    with pytest.raises(UnknownEncryptionKeyError) as caught:
        await stranger.decode([sealed])
    assert caught.value.details == {"key_id": "k1"}
    assert "k2" in str(caught.value)  # names the keys it does hold
    assert KEY_A not in str(caught.value) and KEY_B not in str(caught.value)


@pytest.mark.parametrize("position", [0, 5, 12, 20, -1])
async def test_tampered_ciphertext_fails_authentication(position: int) -> None:
    codec = EncryptionCodec(Keyring([("k1", KEY_A)]))
    [sealed] = await codec.encode([json_payload(SECRET)])
    data = bytearray(sealed.data)
    data[position] ^= 0x01  # nonce, ciphertext and tag are all covered
    tampered = Payload(metadata=dict(sealed.metadata), data=bytes(data))
    with pytest.raises(PayloadDecryptionError, match="failed authentication"):
        await codec.decode([tampered])


async def test_relabelling_the_key_id_fails_even_when_both_ids_hold_the_same_key() -> None:
    codec = EncryptionCodec(Keyring([("old", KEY_A), ("new", KEY_A)]))
    [sealed] = await codec.encode([json_payload(SECRET)])
    relabelled = Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: b"old"}, data=sealed.data)
    with pytest.raises(PayloadDecryptionError, match="failed authentication"):
        await codec.decode([relabelled])


async def test_truncated_or_unlabelled_ciphertext_is_an_error() -> None:
    codec = EncryptionCodec(Keyring([("k1", KEY_A)]))
    [sealed] = await codec.encode([json_payload(SECRET)])
    truncated = Payload(metadata=dict(sealed.metadata), data=sealed.data[:20])
    with pytest.raises(PayloadDecryptionError, match="too short"):
        await codec.decode([truncated])
    unlabelled = Payload(metadata={"encoding": ENCODING}, data=sealed.data)
    with pytest.raises(PayloadDecryptionError, match=KEY_ID_METADATA):
        await codec.decode([unlabelled])


async def test_plaintext_payloads_written_before_encryption_stay_readable() -> None:
    codec = EncryptionCodec(Keyring([("k1", KEY_A)]))
    plain = json_payload("written before encryption was enabled")
    assert await codec.decode([plain]) == [plain]


def test_keys_parse_from_hex_and_base64_in_every_common_spelling() -> None:
    raw = bytes(range(32))
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    assert parse_key_material(raw.hex()) == raw
    assert parse_key_material(raw.hex().upper()) == raw
    assert parse_key_material(base64.b64encode(raw).decode()) == raw
    assert parse_key_material(urlsafe) == raw
    assert parse_key_material(urlsafe.rstrip("=")) == raw
    assert Keyring([("raw", raw)]).current.secret == raw


@pytest.mark.parametrize(
    "material",
    [
        base64.b64encode(bytes(16)).decode(),  # AES-128 sized
        base64.b64encode(bytes(31)).decode(),
        bytes(24).hex(),
        "not a key at all!",
        "",
        bytes(16),
    ],
)
def test_a_key_that_is_not_256_bits_is_rejected_at_construction(material: str | bytes) -> None:
    with pytest.raises(ValueError, match="'k1'"):
        Keyring([("k1", material)])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "not of that form"),
        ("k1", "not of that form"),
        (f"k1:{KEY_A},", "entry 2"),
        (f":{KEY_A}", "not of that form"),
        (f"k1:{KEY_A},k1:{KEY_B}", "appears twice"),
        (f"bad id:{KEY_A}", "must be 1-64 characters"),
    ],
)
def test_malformed_key_specs_are_rejected(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Keyring.parse(spec)


def test_spec_lists_keys_oldest_first_and_never_shows_secrets() -> None:
    keyring = Keyring.parse(f" 2024:{KEY_A} , 2025:{bytes(range(32)).hex()} ")
    assert keyring.key_ids == ["2024", "2025"]
    assert keyring.current.key_id == "2025"
    assert KEY_A not in repr(keyring) and KEY_A not in repr(keyring.current)
    assert bytes(range(32)).hex() not in repr(keyring.current)


def test_generated_keys_are_256_bit_and_distinct() -> None:
    assert len(parse_key_material(generate_key())) == 32
    assert generate_key() != generate_key()


async def test_encrypted_data_converter_seals_pydantic_models_and_failure_text() -> None:
    converter = encrypted_data_converter(Keyring([("k1", KEY_A)]))
    assert isinstance(converter.failure_converter, DefaultFailureConverterWithEncodedAttributes)
    message = SendMessageInput(turn_id="t1", content=SECRET)
    [payload] = await converter.encode([message])
    assert payload.metadata["encoding"] == ENCODING
    assert SECRET.encode() not in payload.SerializeToString()
    [back] = await converter.decode([payload], [SendMessageInput])
    assert back == message
    # The shared converters are untouched: encrypting one client changes no other.
    assert pydantic_data_converter.payload_codec is None
    assert statecore_data_converter() is STATECORE_DATA_CONVERTER
    assert STATECORE_DATA_CONVERTER.payload_codec is None


def test_worker_flag_and_environment_build_the_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    from statecore.cli._app import build_parser
    from statecore.temporal._environment import Environment
    from statecore.temporal._settings import worker_config
    from statecore.temporal._worker import build_codec
    from statecore.temporal._worker_config import WorkerConfig

    def parse_config(argv: list[str]) -> WorkerConfig:
        args = build_parser().parse_args(["worker", *argv])
        return worker_config(args, Environment.from_process(), dev=False)

    monkeypatch.setenv("STATECORE_ENCRYPTION_KEYS", f"env-old:{KEY_A},env-new:{KEY_B}")
    codec = build_codec(parse_config([]))
    assert isinstance(codec, EncryptionCodec)
    assert codec.keyring.key_ids == ["env-old", "env-new"]

    flagged = build_codec(parse_config(["--encryption-keys", f"flag:{KEY_A}"]))
    assert isinstance(flagged, EncryptionCodec) and flagged.keyring.key_ids == ["flag"]

    monkeypatch.delenv("STATECORE_ENCRYPTION_KEYS")
    assert build_codec(parse_config([])) is None
    with pytest.raises(ValueError, match="256"):
        build_codec(parse_config(["--encryption-keys", f"short:{bytes(16).hex()}"]))
