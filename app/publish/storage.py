"""Published builds, content-addressed and immutable: a blob per file, a manifest per build.

A blob is named by the SHA-256 of its bytes, a manifest (the build's paths, each with its blob's
digest and size) by the SHA-256 of its canonical JSON. Neither is ever rewritten: storing what
is there already is a no-op, so two builds of one app share every file they have in common, and
a link that points at a manifest serves exactly those bytes for as long as it points there.

:class:`BuildStorage` is what kiln needs of a place keeping builds: small on purpose, so that an
object store (a bucket with ``blobs/<digest>`` and ``manifests/<digest>``) can implement it.
:class:`LocalBuildStorage` keeps them under ``<data dir>/published``::

    blobs/ab/cdef…          the file whose SHA-256 is abcdef…
    manifests/<digest>.json one build

Writes go to a temporary name and are hard-linked into place (never a half-written file under a
final name; two writers of one digest agree). Its methods block: callers run them in a thread.

Garbage collection (:meth:`LocalBuildStorage.collect`) removes the manifests no link serves and
then the blobs no remaining manifest names, sparing anything younger than a grace period: a
publish writes its blobs and manifest *before* it moves the link, and must not lose them to a
collection that ran in between.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from app.publish.errors import PublishError

MANIFEST_FORMAT = 1
HEX = frozenset("0123456789abcdef")
DIGEST_LENGTH = 64


def digest_of(data: bytes) -> str:
    """The SHA-256 of ``data``, in hex: a blob's name."""
    return hashlib.sha256(data).hexdigest()


def is_digest(name: str) -> bool:
    """Whether ``name`` is a SHA-256 in lowercase hex (nothing else names a stored object)."""
    return len(name) == DIGEST_LENGTH and set(name) <= HEX


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One file of a build: its blob and size."""

    digest: str
    size: int


@dataclass(frozen=True, slots=True)
class Manifest:
    """A build: its files by path (``index.html``, ``assets/index-4f2a.js``), and where it
    came from (the chat and version)."""

    files: Mapping[str, ManifestEntry]
    chat: str = ""
    version: int = 0
    created: float = field(default_factory=time.time)

    @property
    def total_bytes(self) -> int:
        """The build's size: its files' bytes."""
        return sum(entry.size for entry in self.files.values())

    def encode(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): its digest is the manifest's name."""
        body: dict[str, Any] = {
            "format": MANIFEST_FORMAT,
            "chat": self.chat,
            "version": self.version,
            "created": self.created,
            "files": {
                path: {"sha256": entry.digest, "size": entry.size}
                for path, entry in sorted(self.files.items())
            },
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Manifest:
        """The manifest :meth:`encode` wrote; :class:`PublishError` for anything else."""
        try:
            body = json.loads(data)
            files = {
                str(path): ManifestEntry(str(entry["sha256"]), int(entry["size"]))
                for path, entry in body["files"].items()
            }
            return cls(files, str(body["chat"]), int(body["version"]), float(body["created"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PublishError(f"a stored manifest cannot be read: {exc}") from exc


@dataclass(frozen=True, slots=True)
class CollectReport:
    """What a garbage collection removed and kept."""

    manifests_removed: int = 0
    blobs_removed: int = 0
    bytes_freed: int = 0
    manifests_kept: int = 0


class BuildStorage(Protocol):
    """Where published builds are kept (module docstring). Methods block."""

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` (once: it may be there already); its digest."""
        ...

    def blob(self, digest: str) -> bytes | None:
        """The bytes stored under ``digest``, or None."""
        ...

    def put_manifest(self, manifest: Manifest) -> str:
        """Store a build's manifest (its blobs are stored already); its digest."""
        ...

    def manifest(self, digest: str) -> Manifest | None:
        """The manifest stored under ``digest``, or None."""
        ...

    def collect(self, keep: set[str], grace_seconds: float) -> CollectReport:
        """Remove the manifests not in ``keep`` and the blobs no kept manifest names, except
        what was stored less than ``grace_seconds`` ago."""
        ...


class LocalBuildStorage:
    """:class:`BuildStorage` in a folder of the data directory (module docstring)."""

    def __init__(self, root: Path) -> None:
        """Keep builds under ``root`` (made when first written)."""
        self.root = root
        self.blobs = root / "blobs"
        self.manifests = root / "manifests"

    def __repr__(self) -> str:
        return f"LocalBuildStorage({str(self.root)!r})"

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` under its digest (a no-op when it is there)."""
        digest = digest_of(data)
        self._put(self._blob_path(digest), data)
        return digest

    def blob(self, digest: str) -> bytes | None:
        """The stored bytes of ``digest``, or None (also for a name that is no digest)."""
        if not is_digest(digest):
            return None
        return _read(self._blob_path(digest))

    def put_manifest(self, manifest: Manifest) -> str:
        """Store the manifest under the digest of its canonical JSON."""
        data = manifest.encode()
        digest = digest_of(data)
        self._put(self._manifest_path(digest), data)
        return digest

    def manifest(self, digest: str) -> Manifest | None:
        """The manifest stored under ``digest``, or None."""
        if not is_digest(digest):
            return None
        data = _read(self._manifest_path(digest))
        return Manifest.decode(data) if data is not None else None

    def collect(self, keep: set[str], grace_seconds: float) -> CollectReport:
        """Remove unserved manifests, then unreferenced blobs, sparing young ones."""
        cutoff = time.time() - grace_seconds
        referenced: set[str] = set()
        kept = removed = 0
        for path in _entries(self.manifests):
            digest = path.name.removesuffix(".json")
            if digest in keep or _mtime(path) > cutoff:
                kept += 1
                referenced.update(self._blobs_of(digest))
            elif _remove(path) is not None:
                removed += 1
        blobs = freed = 0
        for folder in _entries(self.blobs):
            for path in _entries(folder):
                if folder.name + path.name in referenced or _mtime(path) > cutoff:
                    continue
                size = _remove(path)
                if size is not None:
                    blobs, freed = blobs + 1, freed + size
        return CollectReport(removed, blobs, freed, kept)

    def _blobs_of(self, digest: str) -> set[str]:
        stored = self.manifest(digest)
        return {entry.digest for entry in stored.files.values()} if stored else set()

    def _blob_path(self, digest: str) -> Path:
        return self.blobs / digest[:2] / digest[2:]

    def _manifest_path(self, digest: str) -> Path:
        return self.manifests / f"{digest}.json"

    def _put(self, path: Path, data: bytes) -> None:
        """Write ``path`` once: a temporary file hard-linked into place, read-only."""
        if path.exists():
            os.utime(path)  # stored again just now: a collection's grace starts over
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another writer stored the same bytes first
            finally:
                temporary.unlink()
        except OSError as exc:
            raise PublishError(f"cannot store a published file in {str(path)!r}: {exc}") from exc


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PublishError(f"cannot read the published file {str(path)!r}: {exc}") from exc


def _entries(folder: Path) -> list[Path]:
    """The entries of ``folder`` kiln wrote (temporary files start with a dot)."""
    try:
        return sorted(path for path in folder.iterdir() if not path.name.startswith("."))
    except FileNotFoundError:
        return []


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _remove(path: Path) -> int | None:
    """Remove ``path``; its size, or None if it was gone already."""
    try:
        size = path.stat().st_size
        path.unlink()
    except FileNotFoundError:
        return None
    return size
