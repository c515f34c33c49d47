"""app/publish/storage.py: content-addressed, immutable builds on disk, and their collection."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from app.publish.errors import PublishError
from app.publish.storage import LocalBuildStorage, Manifest, ManifestEntry, digest_of


@pytest.fixture
def storage(tmp_path: Path) -> LocalBuildStorage:
    return LocalBuildStorage(tmp_path / "published")


def build(storage: LocalBuildStorage, files: dict[str, bytes], version: int = 1) -> str:
    entries = {
        path: ManifestEntry(storage.put_blob(data), len(data)) for path, data in files.items()
    }
    return storage.put_manifest(Manifest(entries, "chat1", version, created=1.0))


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_blob_is_stored_once_under_its_sha256_and_read_back(storage: LocalBuildStorage) -> None:
    digest = storage.put_blob(b"<h1>hi</h1>")
    assert digest == digest_of(b"<h1>hi</h1>")
    assert storage.put_blob(b"<h1>hi</h1>") == digest
    assert storage.blob(digest) == b"<h1>hi</h1>"
    assert len(list((storage.blobs).rglob("*"))) == 2  # one folder, one file: no temporaries


def test_stored_files_are_read_only(storage: LocalBuildStorage) -> None:
    digest = storage.put_blob(b"x")
    mode = (storage.blobs / digest[:2] / digest[2:]).stat().st_mode
    assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("../../etc/passwd", id="climbing"),
        pytest.param("ABC", id="not-hex"),
        pytest.param("0" * 63, id="short"),
    ],
)
def test_a_name_that_is_no_digest_reads_nothing(storage: LocalBuildStorage, name: str) -> None:
    assert storage.blob(name) is None
    assert storage.manifest(name) is None


def test_a_manifest_round_trips_and_its_name_is_its_content(storage: LocalBuildStorage) -> None:
    first = build(storage, {"index.html": b"a", "assets/x.js": b"b"})
    again = build(storage, {"assets/x.js": b"b", "index.html": b"a"})
    assert first == again  # canonical: the same build is the same manifest
    manifest = storage.manifest(first)
    assert manifest is not None
    assert dict(manifest.files) == {
        "index.html": ManifestEntry(digest_of(b"a"), 1),
        "assets/x.js": ManifestEntry(digest_of(b"b"), 1),
    }
    assert (manifest.chat, manifest.version, manifest.total_bytes) == ("chat1", 1, 2)


def test_a_damaged_manifest_is_a_publish_error(storage: LocalBuildStorage) -> None:
    digest = digest_of(b"junk")
    storage.manifests.mkdir(parents=True)
    (storage.manifests / f"{digest}.json").write_bytes(b"junk")
    with pytest.raises(PublishError, match="cannot be read"):
        storage.manifest(digest)


def test_collect_keeps_served_builds_and_removes_the_rest(storage: LocalBuildStorage) -> None:
    served = build(storage, {"index.html": b"new", "shared.js": b"s"}, 2)
    old = build(storage, {"index.html": b"old", "shared.js": b"s"}, 1)
    for path in [*storage.blobs.rglob("*"), *storage.manifests.iterdir()]:
        age(path, 100)
    report = storage.collect({served}, grace_seconds=10)
    assert (report.manifests_removed, report.blobs_removed, report.manifests_kept) == (1, 1, 1)
    assert report.bytes_freed == 3
    assert storage.manifest(old) is None
    assert storage.blob(digest_of(b"old")) is None
    assert storage.blob(digest_of(b"s")) == b"s"  # shared with the served build
    assert storage.blob(digest_of(b"new")) == b"new"


def test_collect_spares_what_was_stored_within_the_grace(storage: LocalBuildStorage) -> None:
    in_flight = build(storage, {"index.html": b"being published"})
    report = storage.collect(set(), grace_seconds=60)
    assert report.manifests_removed == report.blobs_removed == 0
    assert storage.manifest(in_flight) is not None


def test_storing_an_old_blob_again_restarts_its_grace(storage: LocalBuildStorage) -> None:
    digest = storage.put_blob(b"again")
    path = storage.blobs / digest[:2] / digest[2:]
    age(path, 100)
    storage.put_blob(b"again")  # a new publish uses it: it must survive the next collection
    assert storage.collect(set(), grace_seconds=10).blobs_removed == 0


def test_collect_on_an_empty_folder_does_nothing(storage: LocalBuildStorage) -> None:
    assert storage.collect(set(), grace_seconds=0).manifests_kept == 0
