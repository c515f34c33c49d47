"""Preview credentials sealed to one sandbox and one purpose, so they are worth nothing elsewhere.

A preview's sign-in link and its cookie carry store tokens (a one-time ``login`` token, then a
``session`` token), but never in the clear: each is encrypted (Fernet, a key derived from the
service's secret) together with its purpose and the sandbox id. So

- a preview sign-in link cannot sign in the UI (``/login`` sees no login token in it: the
  attack was a generated app sending the top window to ``/login?token=<the attacker's preview
  token>``), nor open another sandbox's preview;
- a preview cookie, should it ever leak, is no API credential and opens only its own preview.

:meth:`PreviewSeal.open` answers ``None`` for anything it did not seal for that purpose and
sandbox (tampered, another key, another sandbox), never an exception.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_INFO = b"kiln preview credentials v1"
LOGIN = "login"  # the purposes
SESSION = "session"


class PreviewSeal:
    """Seals store tokens to ``(purpose, sandbox id)`` with a key derived from ``secret``."""

    def __init__(self, secret: str) -> None:
        """Derive the key (HKDF-SHA256 with a label of its own, never the raw secret)."""
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
            secret.encode()
        )
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def __repr__(self) -> str:
        return "PreviewSeal(<hidden>)"

    def seal(self, purpose: str, sandbox_id: str, token: str) -> str:
        """``token`` sealed for ``purpose`` on ``sandbox_id`` (URL- and cookie-safe text)."""
        return self._fernet.encrypt(f"{purpose}\0{sandbox_id}\0{token}".encode()).decode()

    def open(self, purpose: str, sandbox_id: str, sealed: str) -> str | None:
        """The token inside ``sealed`` if it was sealed for ``purpose`` and ``sandbox_id``."""
        try:
            plain = self._fernet.decrypt(sealed.encode()).decode()
        except (InvalidToken, UnicodeError):
            return None
        sealed_purpose, _, rest = plain.partition("\0")
        sealed_sandbox, _, token = rest.partition("\0")
        if (sealed_purpose, sealed_sandbox) != (purpose, sandbox_id) or not token:
            return None
        return token
