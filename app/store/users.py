"""Users, their tokens (stored hashed) and their provider keys (stored encrypted).

A token is shown once, when created; the database only keeps its SHA-256. Login tokens (the
link ``kiln serve`` prints) are one-time: :meth:`UserTables.consume_login_token` deletes the
token in the same statement that reads it, so two requests cannot both use it.
"""

from __future__ import annotations

import time

from app.store.crypto import SecretBox, hash_token, new_token
from app.store.db import Database, StoreConflict
from app.store.models import TOKEN_KINDS, User, new_id, user_from_row


class UserTables:
    """The ``users``, ``tokens`` and ``provider_keys`` tables."""

    _db: Database
    _box: SecretBox

    def create_user(self, name: str) -> User:
        """A new user; :class:`StoreConflict` if ``name`` is taken."""
        if not name.strip():
            raise ValueError(f"a user name must not be blank, got {name!r}")
        user = User(new_id(), name, time.time())
        with self._db.transaction() as db:
            if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise StoreConflict(f"a user named {name!r} exists already")
            db.execute(
                "INSERT INTO users (id, name, created) VALUES (?, ?, ?)",
                (user.id, user.name, user.created),
            )
        return user

    def get_user(self, user_id: str) -> User | None:
        """The user with this id, or None."""
        row = self._db.query_one("SELECT * FROM users WHERE id = ?", (user_id,))
        return user_from_row(row) if row else None

    def user_by_name(self, name: str) -> User | None:
        """The user with this name, or None."""
        row = self._db.query_one("SELECT * FROM users WHERE name = ?", (name,))
        return user_from_row(row) if row else None

    def create_token(self, user_id: str, kind: str = "api", ttl: float | None = None) -> str:
        """A new token of ``kind`` for the user, valid ``ttl`` seconds (None: no expiry).

        The plain token is returned once and never stored.
        """
        _check_kind(kind)
        token = new_token()
        now = time.time()
        expires = now + ttl if ttl is not None else None
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO tokens (hash, user_id, kind, created, expires) VALUES (?, ?, ?, ?, ?)",
                (hash_token(token), user_id, kind, now, expires),
            )
        return token

    def user_for_token(self, token: str, kind: str) -> User | None:
        """The owner of a valid, unexpired token of ``kind``; None otherwise."""
        _check_kind(kind)
        row = self._db.query_one(
            "SELECT users.* FROM tokens JOIN users ON users.id = tokens.user_id"
            " WHERE tokens.hash = ? AND tokens.kind = ?"
            " AND (tokens.expires IS NULL OR tokens.expires > ?)",
            (hash_token(token), kind, time.time()),
        )
        return user_from_row(row) if row else None

    def consume_login_token(self, token: str) -> User | None:
        """The owner of a valid login token, which is deleted (one-time); None otherwise."""
        with self._db.transaction() as db:
            row = db.execute(
                "DELETE FROM tokens WHERE hash = ? AND kind = 'login' RETURNING user_id, expires",
                (hash_token(token),),
            ).fetchone()
        if row is None or (row["expires"] is not None and row["expires"] <= time.time()):
            return None
        return self.get_user(row["user_id"])

    def revoke_token(self, token: str, kind: str) -> bool:
        """Delete one token of ``kind`` (a sign-out); False if there was none."""
        _check_kind(kind)
        with self._db.transaction() as db:
            removed = db.execute(
                "DELETE FROM tokens WHERE hash = ? AND kind = ?", (hash_token(token), kind)
            ).rowcount
        return removed > 0

    def revoke_sessions(self, user_id: str) -> int:
        """Delete every browser credential of the user: sessions (the UI's and the previews')
        and unused sign-in links. API tokens stay. How many went."""
        with self._db.transaction() as db:
            removed = db.execute(
                "DELETE FROM tokens WHERE user_id = ? AND kind IN ('session', 'login')",
                (user_id,),
            ).rowcount
        return int(removed)

    def set_provider_key(self, user_id: str, provider: str, key: str) -> None:
        """Store (or replace) the user's API key for ``provider``, encrypted."""
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO provider_keys (user_id, provider, secret, updated)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (user_id, provider)"
                " DO UPDATE SET secret = excluded.secret, updated = excluded.updated",
                (user_id, provider, self._box.encrypt(key), time.time()),
            )

    def delete_provider_key(self, user_id: str, provider: str) -> bool:
        """Forget the user's key for ``provider``; False if none was stored."""
        with self._db.transaction() as db:
            removed = db.execute(
                "DELETE FROM provider_keys WHERE user_id = ? AND provider = ?", (user_id, provider)
            ).rowcount
        return removed > 0

    def provider_keys(self, user_id: str) -> dict[str, str]:
        """The user's provider keys, decrypted: never log or return them to a client."""
        rows = self._db.query(
            "SELECT provider, secret FROM provider_keys WHERE user_id = ?", (user_id,)
        )
        return {row["provider"]: self._box.decrypt(row["secret"]) for row in rows}

    def provider_key_names(self, user_id: str) -> list[str]:
        """The providers the user stored a key for, sorted."""
        rows = self._db.query(
            "SELECT provider FROM provider_keys WHERE user_id = ? ORDER BY provider", (user_id,)
        )
        return [row["provider"] for row in rows]


def _check_kind(kind: str) -> None:
    if kind not in TOKEN_KINDS:
        raise ValueError(f"token kind must be one of {', '.join(TOKEN_KINDS)}, got {kind!r}")
