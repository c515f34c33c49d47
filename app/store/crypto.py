"""Secrets at rest: provider keys encrypted with Fernet, tokens reduced to SHA-256 hashes.

The Fernet key is derived from the service's secret (``KILN_SECRET_KEY`` or the generated
``secret.key``, see :mod:`app.config`) with HKDF-SHA256 and a fixed purpose label, so the raw
secret is never used as a key directly and other purposes can derive keys of their own.
Tokens are random (256 bits), so a plain SHA-256 is enough to make a stolen database useless
for logging in; a slow password hash would add nothing.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from app.store.db import StoreError

_PURPOSE = b"kiln provider keys v1"


class SecretBox:
    """Encrypts and decrypts short strings (provider API keys) with the service's secret."""

    def __init__(self, secret: str) -> None:
        """Derive the Fernet key from ``secret``."""
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_PURPOSE).derive(
            secret.encode()
        )
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))

    def __repr__(self) -> str:
        return "SecretBox(<hidden>)"

    def encrypt(self, plain: str) -> bytes:
        """The Fernet token of ``plain`` (authenticated, with a random IV)."""
        return self._fernet.encrypt(plain.encode())

    def decrypt(self, token: bytes) -> str:
        """The plain text of ``token``; :class:`StoreError` if the secret does not open it."""
        try:
            return self._fernet.decrypt(token).decode()
        except InvalidToken:
            raise StoreError(
                "a stored provider key or app secret cannot be decrypted: the secret key changed "
                "(KILN_SECRET_KEY or secret.key); store it again"
            ) from None


def new_token() -> str:
    """A fresh random token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest under which a token is stored."""
    return hashlib.sha256(token.encode()).hexdigest()
