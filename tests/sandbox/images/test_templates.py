"""The templates: what each one's build is, and running it without npm when that is the same."""

from __future__ import annotations

import json

import docker
import pytest

from app.projects.lock_urls import public_lock
from sandbox.images.settings import default_images_dir
from sandbox.images.templates import TEMPLATES, direct_build, get_template

VITE = get_template("vite-react")


def _manifest(**fields: object) -> str:
    return json.dumps({"name": "kiln-app", "version": "0.0.0", **fields})


def test_the_templates_own_build_script_runs_without_npm_with_npms_header() -> None:
    plan = direct_build(VITE, _manifest(scripts={"build": "vite build", "dev": "vite"}))
    assert plan == (
        ["node", "node_modules/vite/bin/vite.js", "build"],
        ["", "> kiln-app@0.0.0 build", "> vite build", ""],
    )


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param(_manifest(scripts={"build": "tsc && vite build"}), id="changed-script"),
        pytest.param(
            _manifest(scripts={"build": "vite build", "prebuild": "node gen.js"}), id="prebuild"
        ),
        pytest.param(
            _manifest(scripts={"build": "vite build", "postbuild": "node a.js"}), id="postbuild"
        ),
        pytest.param(_manifest(), id="no-scripts"),
        pytest.param('{"scripts": ', id="not-json"),
        pytest.param("[1]", id="not-an-object"),
        pytest.param(None, id="missing"),
    ],
)
def test_anything_else_is_left_to_npm(manifest: str | None) -> None:
    assert direct_build(VITE, manifest) is None


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_images_package_json_builds_directly_with_a_program_it_has(name: str) -> None:
    """The image and the template agree: its build script is the template's, and the program
    the direct build runs is in its workspace."""
    template = get_template(name)
    client = docker.from_env()
    try:
        manifest = client.containers.run(
            template.image, ["cat", "/workspace/package.json"], remove=True, entrypoint=""
        ).decode()
        plan = direct_build(template, manifest)
        assert plan is not None
        program = f"/workspace/{plan[0][1]}"
        client.containers.run(template.image, ["test", "-f", program], remove=True, entrypoint="")
        if template.builder:  # the resident builder's client too (outside the workspace)
            client.containers.run(
                template.image, ["test", "-f", template.builder[1]], remove=True, entrypoint=""
            )
    finally:
        client.close()


@pytest.mark.parametrize(
    ("warm", "argv"),
    [
        pytest.param(False, ["node", "/usr/local/lib/kiln/kiln-build.mjs"], id="build"),
        pytest.param(True, ["node", "/usr/local/lib/kiln/kiln-build.mjs", "--warm"], id="warm"),
    ],
)
def test_the_resident_builders_client(warm: bool, argv: list[str]) -> None:
    assert VITE.builder_argv(warm=warm) == argv


def test_a_template_without_a_resident_builder_says_so() -> None:
    with pytest.raises(ValueError, match="'vanilla' has no resident builder"):
        get_template("vanilla").builder_argv(warm=True)


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_a_templates_lock_is_valid_on_every_platform_and_names_no_private_host(
    template: str,
) -> None:
    """Every optional dependency (rollup's binaries for darwin, win32, ...) has its entry: npm ci
    on another platform refuses a lock without them, and an exported app starts from this lock.
    And no ``resolved`` URL on kiln's proxy (app/projects/lock_urls)."""
    text = (default_images_dir() / template / "workspace" / "package-lock.json").read_bytes()
    packages = json.loads(text)["packages"]
    missing = [
        f"{path} -> {name}"
        for path, entry in packages.items()
        for name in entry.get("optionalDependencies") or {}
        if not _resolves(packages, path, name)
    ]
    assert missing == []
    assert public_lock(text) == text


def _resolves(packages: dict[str, object], path: str, name: str) -> bool:
    """Whether ``name`` required from ``path`` has an entry where node would look for it."""
    folder = path
    while True:
        if f"{folder}/node_modules/{name}".lstrip("/") in packages:
            return True
        if not folder:
            return False
        folder = folder.rsplit("/node_modules/", 1)[0] if "/node_modules/" in folder else ""
