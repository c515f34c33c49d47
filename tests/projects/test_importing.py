"""app/projects/importing.py: the template of an imported repository, and what it keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.projects.errors import ImportRefused
from app.projects.importing import detect_template, project_files, static_scaffold

IMAGES = Path(__file__).resolve().parents[2] / "images"


def manifest(**sections: dict[str, str]) -> dict[str, bytes]:
    return {"package.json": json.dumps(sections).encode(), "index.html": b"<p>"}


@pytest.mark.parametrize(
    ("files", "template"),
    [
        pytest.param(manifest(dependencies={"next": "15", "react": "19"}), "nextjs", id="next"),
        pytest.param(manifest(devDependencies={"vite": "5"}), "vite-react", id="vite"),
        pytest.param(manifest(dependencies={"react": "18"}), "vite-react", id="react"),
        pytest.param({"index.html": b"<p>"}, "vanilla", id="static-site"),
    ],
)
def test_the_template_comes_from_package_json(files: dict[str, bytes], template: str) -> None:
    assert detect_template(files) == template


@pytest.mark.parametrize(
    ("files", "said"),
    [
        pytest.param(manifest(dependencies={"express": "4"}), "cannot tell how to run", id="other"),
        pytest.param({"package.json": b"{not json"}, "not JSON", id="broken"),
        pytest.param({"package.json": b"[1]"}, "not a JSON object", id="array"),
    ],
)
def test_a_package_json_kiln_cannot_run_is_refused_in_words(
    files: dict[str, bytes], said: str
) -> None:
    with pytest.raises(ImportRefused, match=said):
        detect_template(files)


def test_dependencies_build_output_and_logs_are_left_out_and_named() -> None:
    kept, left = project_files(
        {"src/a.js": b"1", "node_modules/x/i.js": b"2", "dist/i.html": b"3", "npm-debug.log": b""}
    )
    assert kept == {"src/a.js": b"1"}
    assert set(left) == {"node_modules/x/i.js", "dist/i.html", "npm-debug.log"}


def test_a_static_site_gets_the_vanilla_files_that_serve_it() -> None:
    added = static_scaffold(IMAGES, {"index.html": b"<p>", "server.js": b"mine"})
    assert set(added) == {"package.json"}  # the repository's own server.js stays
    assert json.loads(added["package.json"])["scripts"]["dev"] == "node server.js"
    with pytest.raises(ImportRefused, match="KILN_IMAGES_DIR"):
        static_scaffold(IMAGES / "absent", {})
