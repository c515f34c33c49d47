"""Lock files without kiln's addresses: private ``resolved`` hosts made public, nothing else."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from app.projects.lock_urls import public_archive, public_lock, public_locks

PRIVATE = "http://172.19.0.1:4873/zustand/-/zustand-5.1.0.tgz"
PUBLIC = "https://registry.npmjs.org/zustand/-/zustand-5.1.0.tgz"


def _lock(resolved: str) -> bytes:
    package = {"version": "5.1.0", "resolved": resolved, "integrity": "sha512-x"}
    lock = {"name": "app", "lockfileVersion": 3, "packages": {"node_modules/zustand": package}}
    return (json.dumps(lock, indent=2) + "\n").encode()


@pytest.mark.parametrize(
    "origin",
    [
        pytest.param("http://172.19.0.1:4873", id="docker-gateway"),
        pytest.param("http://10.1.2.3:4873", id="rfc1918"),
        pytest.param("http://127.0.0.1:4873", id="loopback"),
        pytest.param("http://localhost:4873", id="localhost"),
        pytest.param("http://169.254.1.1", id="link-local"),
    ],
)
def test_a_private_host_becomes_the_public_registry_with_the_same_path(origin: str) -> None:
    text = _lock(f"{origin}/zustand/-/zustand-5.1.0.tgz")
    repaired = public_lock(text)
    assert json.loads(repaired)["packages"]["node_modules/zustand"]["resolved"] == PUBLIC
    assert repaired == _lock(PUBLIC)  # every other byte as it was


@pytest.mark.parametrize(
    "resolved",
    [
        pytest.param(PUBLIC, id="npmjs"),
        pytest.param("https://npm.corp.example/zustand/-/zustand-5.1.0.tgz", id="a-mirror"),
        pytest.param("git+ssh://git@github.com/a/b.git#abc", id="git"),
    ],
)
def test_public_and_other_urls_stay(resolved: str) -> None:
    assert public_lock(_lock(resolved)) == _lock(resolved)


def test_only_lock_files_are_touched() -> None:
    files = {
        "package-lock.json": _lock(PRIVATE),
        "web/npm-shrinkwrap.json": _lock(PRIVATE),
        "notes.md": PRIVATE.encode(),
    }
    repaired = public_locks(files)
    assert repaired["package-lock.json"] == repaired["web/npm-shrinkwrap.json"] == _lock(PUBLIC)
    assert repaired["notes.md"] == PRIVATE.encode()


def _zip(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_an_archive_gets_public_locks_and_keeps_everything_else() -> None:
    archive = _zip({"package-lock.json": _lock(PRIVATE), "src/App.jsx": b"export default 1\n"})
    with zipfile.ZipFile(io.BytesIO(public_archive(archive))) as repaired:
        assert repaired.read("package-lock.json") == _lock(PUBLIC)
        assert repaired.read("src/App.jsx") == b"export default 1\n"
        assert repaired.getinfo("src/App.jsx").compress_type == zipfile.ZIP_DEFLATED


def test_an_archive_with_nothing_to_repair_is_returned_as_it_was() -> None:
    archive = _zip({"package-lock.json": _lock(PUBLIC)})
    assert public_archive(archive) is archive
