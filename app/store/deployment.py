"""The deployment record: what every host on one database must agree on (issue 28).

One ``deployment`` row per name (``id``, ``secret_key``, ``instance``: see
:mod:`app.service.deployment`). The first host to start writes its values; a name already there
keeps the first writer's value (``INSERT OR IGNORE``), so two hosts starting at once agree on
one record and a later host only compares. A name a newer kiln adds is written by the first
host of that version that starts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from app.store.db import Database


class DeploymentTables:
    """The ``deployment`` table."""

    _db: Database

    def deployment_record(self, proposed: Mapping[str, str]) -> dict[str, str]:
        """The record after writing each of ``proposed``'s names not recorded yet (the first
        writer's value stays)."""
        now = time.time()
        with self._db.transaction() as db:
            for name, value in proposed.items():
                db.execute(
                    "INSERT OR IGNORE INTO deployment (name, value, written) VALUES (?, ?, ?)",
                    (name, value, now),
                )
        return self.recorded_deployment()

    def recorded_deployment(self) -> dict[str, str]:
        """The record as it is (empty before any host wrote it)."""
        rows = self._db.query("SELECT name, value FROM deployment")
        return {str(row["name"]): str(row["value"]) for row in rows}
