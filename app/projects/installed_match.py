"""Whether a sandbox's ``node_modules`` already holds what a version's lock file asks for.

A restore that changes ``package.json`` runs ``npm install`` (seconds: npm reads the whole
tree even when nothing is missing). Often nothing is missing: the version declares only the
template's packages (a model renamed the app, added a script), or the sandbox's volume already
holds them. npm keeps a record of what it put into ``node_modules``
(``node_modules/.package-lock.json``, its "hidden lock file"): when that record and the
version's ``package-lock.json`` name the same packages at the same versions and integrity, and
the lock is the one ``package.json`` asks for (its root entry lists the same dependencies),
``npm install`` would change nothing, so the restore skips it (kiln issue 24).

Every doubt means "install": a file missing or not JSON, a package present on one side only
(except an optional one the lock lists for another platform: npm never installs those), a
workspace or linked package (the lock's non-``node_modules/`` entries).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

LOCK = "package-lock.json"
PACKAGE_JSON = "package.json"
INSTALLED_RECORD = "node_modules/.package-lock.json"  # npm's hidden lock file
DEPENDENCY_FIELDS = (
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
)


def _parsed(data: bytes | None) -> dict[str, Any] | None:
    """A JSON object, or ``None`` for anything else (missing, broken, another type)."""
    if data is None:
        return None
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _packages(document: Mapping[str, Any]) -> dict[str, dict[str, Any]] | None:
    """A lock's ``packages`` object (``None`` when it has none)."""
    packages = document.get("packages")
    if not isinstance(packages, dict):
        return None
    return {str(where): entry for where, entry in packages.items() if isinstance(entry, dict)}


def _identity(entry: Mapping[str, Any]) -> tuple[object, object]:
    """What makes two entries the same package: its version and its integrity (the tarball's
    hash; the ``resolved`` URL may differ by registry host, the content cannot)."""
    return entry.get("version"), entry.get("integrity") or entry.get("resolved")


def _lock_asked_for(manifest: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    """Whether the lock's root entry declares what ``package.json`` declares."""
    return all(manifest.get(key, {}) == root.get(key, {}) for key in DEPENDENCY_FIELDS)


def install_changes_nothing(files: Mapping[str, bytes], installed_record: bytes | None) -> bool:
    """Whether ``npm install`` in a workspace holding ``files`` (a version's project files)
    and ``installed_record`` (its ``node_modules/.package-lock.json``) would install nothing."""
    manifest, lock = _parsed(files.get(PACKAGE_JSON)), _parsed(files.get(LOCK))
    record = _parsed(installed_record)
    if manifest is None or lock is None or record is None:
        return False
    wanted, present = _packages(lock), _packages(record)
    if wanted is None or present is None:
        return False
    if not _lock_asked_for(manifest, wanted.pop("", {})):
        return False
    for where, entry in wanted.items():
        if not where.startswith("node_modules/") or entry.get("link"):
            return False
        found = present.get(where)
        if found is None:
            if entry.get("optional"):
                continue  # another platform's build: npm never installs it here
            return False
        if _identity(found) != _identity(entry):
            return False
    return set(present) <= set(wanted)  # anything more, npm install would remove
