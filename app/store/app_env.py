"""Each chat's app environment: variables and secrets, every value encrypted at rest.

The rules (names, sizes, which may be secret) are :mod:`app.projects.app_env`'s; this is only
where they are kept. A value is encrypted with the store's :class:`~app.store.crypto.SecretBox`
(the provider keys' key), a plain variable too, so the database file holds no value in clear.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from app.store.crypto import SecretBox
from app.store.db import Database

# The bundlers' prefixes for variables they inline into the built app (public to its visitors):
# Vite's and Next.js's. Both count whatever the chat's template: a name's kind never depends on
# it, and refusing a `NEXT_PUBLIC_` secret in a Vite app (or the reverse) only errs on the safe
# side. Each template names its own (sandbox's ``Template.public_env_prefix``).
PUBLIC_PREFIXES = ("VITE_", "NEXT_PUBLIC_")


@dataclass(frozen=True, slots=True)
class AppVariable:
    """One variable of a chat's app; its value never appears in ``repr`` (a secret's, and a
    variable's alike: a log line must not tell which is which by showing one)."""

    name: str
    value: str = field(repr=False)
    secret: bool = False
    updated: float = 0.0

    @property
    def public(self) -> bool:
        """Whether a build may inline it into public output (a :data:`PUBLIC_PREFIXES` name)."""
        return self.name.startswith(PUBLIC_PREFIXES)

    def listing(self) -> dict[str, Any]:
        """What the API and the UI show: a secret's value is never in it."""
        shown: dict[str, Any] = {"name": self.name, "secret": self.secret, "public": self.public}
        if not self.secret:
            shown["value"] = self.value
        shown["updated"] = self.updated
        return shown


class AppEnvTables:
    """The ``app_env`` table."""

    _db: Database
    _box: SecretBox

    def set_app_variable(self, chat_id: str, variable: AppVariable) -> AppVariable:
        """Store (or replace) a variable of the chat, its value encrypted; as stored."""
        stored = AppVariable(variable.name, variable.value, variable.secret, time.time())
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO app_env (chat_id, name, value, secret, updated)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (chat_id, name) DO UPDATE SET"
                " value = excluded.value, secret = excluded.secret, updated = excluded.updated",
                (
                    chat_id,
                    stored.name,
                    self._box.encrypt(stored.value),
                    int(stored.secret),
                    stored.updated,
                ),
            )
        return stored

    def delete_app_variable(self, chat_id: str, name: str) -> bool:
        """Forget the chat's variable ``name``; False if there was none."""
        with self._db.transaction() as db:
            removed = db.execute(
                "DELETE FROM app_env WHERE chat_id = ? AND name = ?", (chat_id, name)
            ).rowcount
        return removed > 0

    def app_variables(self, chat_id: str) -> list[AppVariable]:
        """The chat's variables, values decrypted, sorted by name: never log or return a
        secret's value to a client (:meth:`AppVariable.listing`)."""
        rows = self._db.query(
            "SELECT name, value, secret, updated FROM app_env WHERE chat_id = ? ORDER BY name",
            (chat_id,),
        )
        return [
            AppVariable(
                row["name"], self._box.decrypt(row["value"]), bool(row["secret"]), row["updated"]
            )
            for row in rows
        ]
