"""AES-256-GCM payload encryption: workflow history holds ciphertext, never the conversation.

::

    keyring = Keyring.parse(os.environ["STATECORE_ENCRYPTION_KEYS"])  # "2024:base64,2025:base64"
    plugin = StatecorePlugin(database_url, codec=EncryptionCodec(keyring))

Every payload (update, signal and query arguments and results, activity inputs and outputs,
workflow input, failure messages) is serialised whole, metadata included, and sealed with the
keyring's newest key under a fresh random 96-bit nonce. The result carries
``encoding: binary/encrypted`` and ``encryption-key-id: <id>`` so any key the keyring holds
decrypts it: rotating is adding a newer key and keeping the old ones while history needs them.

Search attributes, workflow and activity type names, task queues and the details set with
``workflow.set_current_details`` are not payloads a codec sees; keep secrets out of them.
Needs the ``encryption`` extra (the ``cryptography`` package).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

from statecore.core._errors import PayloadDecryptionError, UnknownEncryptionKeyError
from statecore.temporal._converter import statecore_data_converter

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
KEY_BYTES = 32
NONCE_BYTES = 12
_TAG_BYTES = 16
#: Bound into every ciphertext with the key id, so a payload cannot be relabelled with another
#: key id, and a later format can never be mistaken for this one.
_AAD_PREFIX = b"statecore/aes-256-gcm/v1:"
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")


def generate_key() -> str:
    """A new random 256-bit key, base64-encoded (the form ``--encryption-keys`` takes)."""
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


def parse_key_material(text: str, *, key_id: str = "?") -> bytes:
    """A 256-bit key from 64 hex digits or base64 (standard or URL-safe, padding optional).

    Raises ValueError for anything else; the message never repeats the key."""
    text = text.strip()
    if _HEX_KEY.fullmatch(text):
        return bytes.fromhex(text)
    standard = text.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"encryption key {key_id!r} is neither 64 hex digits nor base64") from None
    if len(raw) != KEY_BYTES:
        raise ValueError(
            f"encryption key {key_id!r} is {len(raw) * 8} bits; AES-256-GCM needs exactly 256"
            f" ({KEY_BYTES} bytes, e.g. from statecore.temporal._encryption.generate_key())"
        )
    return raw


@dataclass(frozen=True)
class EncryptionKey:
    """One named key. ``repr`` never shows the secret."""

    key_id: str
    secret: bytes = field(repr=False)


class Keyring:
    """Named 256-bit keys, oldest first: the newest encrypts, any of them decrypts.

    Args:
        keys: ``(key_id, key)`` pairs, newest last; a key is 32 raw bytes or a hex/base64
            string. Key ids are 1-64 characters of ``A-Z a-z 0-9 . _ -``.

    Raises:
        ValueError: no keys, a malformed or repeated key id, or a key that is not 256 bits.
    """

    def __init__(self, keys: Iterable[tuple[str, str | bytes]]) -> None:
        self._keys: dict[str, EncryptionKey] = {}
        self._ciphers: dict[str, AESGCM] = {}
        for key_id, material in keys:
            if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
                raise ValueError(
                    f"encryption key id {key_id!r} must be 1-64 characters of A-Z a-z 0-9 . _ -"
                )
            if key_id in self._keys:
                raise ValueError(f"encryption key id {key_id!r} appears twice")
            secret = _secret(material, key_id)
            self._keys[key_id] = EncryptionKey(key_id, secret)
            self._ciphers[key_id] = AESGCM(secret)
        if not self._keys:
            raise ValueError("a keyring needs at least one key")
        self._current = list(self._keys.values())[-1]

    @classmethod
    def parse(cls, spec: str) -> Keyring:
        """A keyring from ``"id:key,id:key"`` (newest last), the ``--encryption-keys`` form."""
        pairs: list[tuple[str, str]] = []
        for entry in spec.split(","):
            key_id, sep, material = entry.strip().partition(":")
            if not sep or not key_id or not material:
                raise ValueError(
                    "encryption keys are comma-separated 'id:key' entries (newest last);"
                    f" entry {len(pairs) + 1} is not of that form"
                )
            pairs.append((key_id, material))
        return cls(pairs)

    @property
    def current(self) -> EncryptionKey:
        """The key new payloads are encrypted with (the newest)."""
        return self._current

    @property
    def key_ids(self) -> list[str]:
        """Every key id, oldest first."""
        return list(self._keys)

    def cipher(self, key_id: str) -> AESGCM | None:
        return self._ciphers.get(key_id)

    def __repr__(self) -> str:
        return f"Keyring(key_ids={self.key_ids!r})"


def _secret(material: str | bytes, key_id: str) -> bytes:
    if isinstance(material, bytes):
        if len(material) != KEY_BYTES:
            raise ValueError(
                f"encryption key {key_id!r} is {len(material) * 8} bits; AES-256-GCM needs 256"
            )
        return material
    if isinstance(material, str):
        return parse_key_material(material, key_id=key_id)
    raise ValueError(f"encryption key {key_id!r} must be bytes or a hex/base64 string")


def _aad(key_id: str) -> bytes:
    return _AAD_PREFIX + key_id.encode()


class EncryptionCodec(PayloadCodec):
    """A Temporal ``PayloadCodec`` sealing each payload with AES-256-GCM (see module docs).

    Decoding leaves payloads that are not ``binary/encrypted`` as they are: history written
    before encryption was turned on stays readable. An encrypted payload either decrypts and
    authenticates or raises ``PayloadDecryptionError`` (``UnknownEncryptionKeyError`` when its
    key id is not in the keyring); ciphertext is never handed on as if it were data."""

    def __init__(self, keyring: Keyring) -> None:
        if not isinstance(keyring, Keyring):
            raise ValueError("EncryptionCodec takes a Keyring (see Keyring.parse)")
        self.keyring = keyring

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        key = self.keyring.current
        cipher = self.keyring.cipher(key.key_id)
        assert cipher is not None
        nonce = os.urandom(NONCE_BYTES)
        sealed = cipher.encrypt(nonce, payload.SerializeToString(), _aad(key.key_id))
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: key.key_id.encode()},
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        raw_id = payload.metadata.get(KEY_ID_METADATA)
        if not raw_id:
            raise PayloadDecryptionError(
                f"an encrypted payload has no {KEY_ID_METADATA!r} metadata; it was not written"
                " by statecore's codec"
            )
        key_id = raw_id.decode("utf-8", errors="replace")
        cipher = self.keyring.cipher(key_id)
        if cipher is None:
            raise UnknownEncryptionKeyError(
                f"a payload is encrypted with key id {key_id!r}, which this keyring does not"
                f" hold (it has {', '.join(self.keyring.key_ids)}); add that key, newest last,"
                " to --encryption-keys / STATECORE_ENCRYPTION_KEYS",
                key_id=key_id,
            )
        data = payload.data
        if len(data) < NONCE_BYTES + _TAG_BYTES:
            raise PayloadDecryptionError(
                f"an encrypted payload (key id {key_id!r}) is {len(data)} bytes, too short to"
                " be AES-GCM ciphertext: it was truncated"
            )
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], _aad(key_id))
        except InvalidTag:
            raise PayloadDecryptionError(
                f"an encrypted payload (key id {key_id!r}) failed authentication: it was altered,"
                " or a different key is configured under that id"
            ) from None
        try:
            return Payload.FromString(plain)
        except DecodeError as exc:
            raise PayloadDecryptionError(
                f"an encrypted payload (key id {key_id!r}) authenticated but holds no payload"
            ) from exc


def encrypted_data_converter(keyring: Keyring) -> DataConverter:
    """statecore's pydantic data converter with every payload encrypted under ``keyring``."""
    return statecore_data_converter(EncryptionCodec(keyring))
