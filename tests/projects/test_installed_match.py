"""Whether ``npm install`` would change nothing: a version's lock against npm's record of
``node_modules``; in data, then on the real vite-react image's own record (read through
:func:`app.projects.workspace_io.read_installed_record`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.projects.installed_match import install_changes_nothing
from app.projects.workspace_io import read_installed_record
from tests.sandbox.docker_support import bare_sandbox_container

MANIFEST = {"name": "app", "dependencies": {"react": "^18.3.1"}}
REACT = {"version": "18.3.1", "integrity": "sha512-react", "resolved": "https://r/react.tgz"}
DARWIN = {"version": "4.0.0", "integrity": "sha512-d", "optional": True, "os": ["darwin"]}


def lock(**packages: dict[str, Any]) -> dict[str, Any]:
    """A lock file whose root declares MANIFEST's dependencies, with ``packages``."""
    root = {"": {"name": "app", "dependencies": MANIFEST["dependencies"]}}
    named = {f"node_modules/{name.replace('__', '/')}": entry for name, entry in packages.items()}
    return {"lockfileVersion": 3, "packages": {**root, **named}}


def record(**packages: dict[str, Any]) -> bytes:
    """npm's hidden lock file listing ``packages``."""
    named = {f"node_modules/{name}": entry for name, entry in packages.items()}
    return json.dumps({"lockfileVersion": 3, "packages": named}).encode()


def version(manifest: dict[str, Any], locked: dict[str, Any]) -> dict[str, bytes]:
    return {
        "package.json": json.dumps(manifest).encode(),
        "package-lock.json": json.dumps(locked).encode(),
    }


OTHER_REGISTRY = {**REACT, "resolved": "http://10.0.0.1:4873/react.tgz"}


@pytest.mark.parametrize(
    ("files", "installed", "expected"),
    [
        pytest.param(version(MANIFEST, lock(react=REACT)), record(react=REACT), True, id="same"),
        pytest.param(
            version({**MANIFEST, "name": "renamed", "scripts": {"dev": "vite"}}, lock(react=REACT)),
            record(react=REACT),
            True,
            id="only-the-name-and-scripts-changed",
        ),
        pytest.param(
            version(MANIFEST, lock(react=REACT)),
            record(react=OTHER_REGISTRY),
            True,
            id="same-tarball-from-another-registry-host",
        ),
        pytest.param(
            version(MANIFEST, lock(react=REACT, rollup__darwin=DARWIN)),
            record(react=REACT),
            True,
            id="another-platforms-optional-build-absent",
        ),
        pytest.param(
            version(MANIFEST, lock(react=REACT, zustand={"version": "4.5.0"})),
            record(react=REACT),
            False,
            id="a-package-missing",
        ),
        pytest.param(
            version(MANIFEST, lock(react={**REACT, "version": "18.3.0", "integrity": "x"})),
            record(react=REACT),
            False,
            id="another-version-installed",
        ),
        pytest.param(
            version(MANIFEST, lock(react=REACT)),
            record(react=REACT, zustand={"version": "4.5.0"}),
            False,
            id="an-extra-package-npm-would-remove",
        ),
        pytest.param(
            version({"dependencies": {"react": "^18", "zustand": "^4"}}, lock(react=REACT)),
            record(react=REACT),
            False,
            id="package-json-asks-what-the-lock-lacks",
        ),
        pytest.param(
            {"package.json": json.dumps(MANIFEST).encode()},
            record(react=REACT),
            False,
            id="no-lock",
        ),
        pytest.param(version(MANIFEST, lock(react=REACT)), None, False, id="no-record"),
        pytest.param(version(MANIFEST, lock(react=REACT)), b"{half", False, id="broken-record"),
        pytest.param(
            version(MANIFEST, {"packages": {"": {}, "packages/ui": {"version": "1"}}}),
            record(),
            False,
            id="a-workspace-package",
        ),
    ],
)
def test_whether_an_install_would_change_nothing(
    files: dict[str, bytes], installed: bytes | None, expected: bool
) -> None:
    assert install_changes_nothing(files, installed) is expected


@pytest.fixture(scope="module")
def vite_react() -> Iterator[Any]:
    with bare_sandbox_container("kiln/sandbox-vite-react") as container:
        yield container


def image_files(container: Any) -> dict[str, bytes]:
    """The image's own package.json and lock."""
    return {
        name: container.exec_run(["cat", f"/workspace/{name}"]).output
        for name in ("package.json", "package-lock.json")
    }


@pytest.mark.docker
@pytest.mark.anyio
async def test_the_template_image_holds_exactly_its_lock(vite_react: Any) -> None:
    installed = await read_installed_record(vite_react)
    assert installed is not None
    files = image_files(vite_react)
    assert install_changes_nothing(files, installed)
    manifest = json.loads(files["package.json"])
    renamed = {**files, "package.json": json.dumps({**manifest, "name": "my-app"}).encode()}
    assert install_changes_nothing(renamed, installed)
    manifest["dependencies"]["zustand"] = "^4.5.0"
    with_zustand = {**files, "package.json": json.dumps(manifest).encode()}
    assert not install_changes_nothing(with_zustand, installed)


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_workspace_without_node_modules_has_no_record(vite_react: Any) -> None:
    vite_react.exec_run(["mv", "/workspace/node_modules", "/workspace/nm-away"])
    try:
        assert await read_installed_record(vite_react) is None
    finally:
        vite_react.exec_run(["mv", "/workspace/nm-away", "/workspace/node_modules"])
