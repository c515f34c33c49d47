"""Reading a template's workspace files from the images folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.postgen.template_workspace import read_template_workspace
from sandbox.images.templates import TEMPLATES


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_template_has_its_entrypoints_and_package_json(name: str) -> None:
    files = read_template_workspace(name)

    for path in (*TEMPLATES[name].entrypoints, "package.json"):
        assert path in files
    assert "package-lock.json" not in files
    assert not any(path.startswith("node_modules/") for path in files)


def test_an_images_folder_can_be_named(tmp_path: Path) -> None:
    workspace = tmp_path / "vanilla" / "workspace"
    (workspace / "node_modules" / "x").mkdir(parents=True)
    (workspace / "node_modules" / "x" / "index.js").write_text("skipped")
    (workspace / "package-lock.json").write_text("{}")
    (workspace / "index.html").write_text("<p>hi</p>")

    assert read_template_workspace("vanilla", tmp_path) == {"index.html": "<p>hi</p>"}


def test_the_environment_names_the_images_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nextjs" / "workspace").mkdir(parents=True)
    (tmp_path / "nextjs" / "workspace" / "page.jsx").write_text("x")
    monkeypatch.setenv("KILN_IMAGES_DIR", str(tmp_path))

    assert read_template_workspace("nextjs") == {"page.jsx": "x"}


def test_a_missing_folder_and_an_unknown_template(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="workspace"):
        read_template_workspace("vite-react", tmp_path)
    with pytest.raises(KeyError, match="svelte"):
        read_template_workspace("svelte")
