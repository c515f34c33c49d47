"""Provider keys encrypted with a key derived from the secret; tokens hashed."""

from __future__ import annotations

import hashlib

import pytest

from app.store.crypto import SecretBox, hash_token, new_token
from app.store.db import StoreError


def test_a_key_round_trips_and_the_ciphertext_hides_it() -> None:
    box = SecretBox("one-secret-of-enough-length")
    token = box.encrypt("sk-ant-secret-value")
    assert b"sk-ant" not in token
    assert box.decrypt(token) == "sk-ant-secret-value"
    assert box.encrypt("sk-ant-secret-value") != token  # a fresh IV each time


def test_another_secret_cannot_decrypt() -> None:
    token = SecretBox("one-secret-of-enough-length").encrypt("sk-1")
    with pytest.raises(StoreError, match="secret key changed"):
        SecretBox("another-secret-of-enough-length").decrypt(token)


def test_the_box_never_shows_its_key() -> None:
    assert "secret" not in repr(SecretBox("one-secret-of-enough-length")).replace("SecretBox", "")


def test_tokens_are_random_and_stored_as_sha256() -> None:
    first, second = new_token(), new_token()
    assert first != second
    assert len(first) >= 40
    assert hash_token(first) == hashlib.sha256(first.encode()).hexdigest()
