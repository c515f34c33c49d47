"""Writes to template config files: package.json merged, other config refused, the rest written."""

from __future__ import annotations

import json

import pytest

from sandbox.images.templates import TEMPLATES, get_template
from sandbox.writes.template_files import WriteAction, decide_write, is_template_config

VITE = get_template("vite-react")
TEMPLATE_PACKAGE = json.dumps(
    {
        "name": "kiln-app",
        "scripts": {"dev": "vite", "build": "vite build"},
        "dependencies": {"react": "^18.3.1", "react-dom": "^18.3.1"},
        "devDependencies": {"vite": "^5.4.21"},
    },
    indent=2,
)


def _model_package(**sections: dict[str, str]) -> str:
    return json.dumps({"name": "kiln-app", "scripts": {"dev": "vite"}, **sections})


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("src/App.jsx", id="source"),
        pytest.param("index.html", id="entrypoint"),
        pytest.param("src/package.json", id="nested-package-json"),
    ],
)
def test_ordinary_files_are_written_as_is(path: str) -> None:
    decision = decide_write(VITE, path, "content")
    assert decision.action is WriteAction.WRITE
    assert decision.content == "content"
    assert decision.warnings == ()


@pytest.mark.parametrize(
    ("template", "path"),
    [
        pytest.param(name, path, id=f"{name}:{path}")
        for name, template in TEMPLATES.items()
        for path in template.config_files
        if path != "package.json"
    ],
)
def test_other_config_files_are_refused_with_a_warning_naming_them(
    template: str, path: str
) -> None:
    decision = decide_write(get_template(template), f"./{path}", "export default {}")
    assert decision.action is WriteAction.REFUSE
    assert decision.content is None
    assert repr(path) in decision.warnings[0]


def test_new_dependencies_are_merged_and_listed_for_install() -> None:
    proposed = _model_package(
        dependencies={"react": "^18.2.0", "zod": "^3.23.0"}, devDependencies={"vitest": "^1"}
    )
    decision = decide_write(VITE, "package.json", proposed, TEMPLATE_PACKAGE)
    assert decision.action is WriteAction.MERGE
    assert decision.added == ("zod@^3.23.0", "vitest@^1")
    merged = json.loads(decision.content or "")
    # The template keeps its own react and its scripts; new packages are added, sorted.
    assert merged["dependencies"] == {"react": "^18.3.1", "react-dom": "^18.3.1", "zod": "^3.23.0"}
    assert merged["devDependencies"] == {"vite": "^5.4.21", "vitest": "^1"}
    assert merged["scripts"] == {"dev": "vite", "build": "vite build"}


def test_changed_fields_outside_dependencies_are_reported() -> None:
    decision = decide_write(VITE, "package.json", _model_package(type="module"), TEMPLATE_PACKAGE)
    assert decision.action is WriteAction.MERGE
    assert decision.content is None  # nothing new: nothing to write
    assert "'scripts'" in decision.warnings[0]
    assert "'type'" in decision.warnings[0]


def test_an_identical_package_json_merges_silently() -> None:
    decision = decide_write(VITE, "package.json", TEMPLATE_PACKAGE, TEMPLATE_PACKAGE)
    assert (decision.action, decision.content, decision.added, decision.warnings) == (
        WriteAction.MERGE,
        None,
        (),
        (),
    )


@pytest.mark.parametrize(
    ("name", "version"),
    [
        pytest.param("evil", "git+ssh://git@example.com/x.git", id="git"),
        pytest.param("evil", "file:../../etc", id="file"),
        pytest.param("evil", "https://example.com/x.tgz", id="url"),
        pytest.param("Bad Name", "1.0.0", id="bad-name"),
    ],
)
def test_dependencies_that_are_not_npm_specs_are_skipped_with_a_warning(
    name: str, version: str
) -> None:
    proposed = _model_package(dependencies={name: version, "zod": "3"})
    decision = decide_write(VITE, "package.json", proposed, TEMPLATE_PACKAGE)
    assert decision.added == ("zod@3",)
    assert any(repr(f"{name}@{version}") in warning for warning in decision.warnings)
    assert name not in json.loads(decision.content or "")["dependencies"]


@pytest.mark.parametrize(
    ("current", "proposed", "blamed"),
    [
        pytest.param(TEMPLATE_PACKAGE, "{not json", "not a JSON object", id="proposed-invalid"),
        pytest.param(TEMPLATE_PACKAGE, "[1, 2]", "not a JSON object", id="proposed-array"),
        pytest.param(None, TEMPLATE_PACKAGE, "missing or unreadable", id="current-missing"),
        pytest.param("{", TEMPLATE_PACKAGE, "missing or unreadable", id="current-invalid"),
    ],
)
def test_unusable_package_json_is_refused_never_written(
    current: str | None, proposed: str, blamed: str
) -> None:
    decision = decide_write(VITE, "package.json", proposed, current)
    assert decision.action is WriteAction.REFUSE
    assert decision.content is None
    assert blamed in decision.warnings[0]


def test_a_dependency_section_that_is_not_an_object_is_ignored_with_a_warning() -> None:
    proposed = json.dumps({"dependencies": ["zod"]})
    decision = decide_write(VITE, "package.json", proposed, TEMPLATE_PACKAGE)
    assert decision.added == ()
    assert "'dependencies' is not an object" in decision.warnings[0]


def test_is_template_config_normalizes_the_path() -> None:
    assert is_template_config(VITE, "./vite.config.js")
    assert not is_template_config(VITE, "src/vite.config.js")


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(".npmrc", id="root-npmrc"),
        pytest.param("src/.npmrc", id="nested-npmrc"),
        pytest.param(".yarnrc.yml", id="yarnrc"),
    ],
)
def test_package_manager_config_is_never_written(path: str) -> None:
    """A workspace .npmrc could send scoped installs to another registry (@scope:registry=)."""
    assert is_template_config(VITE, path)
    decision = decide_write(VITE, path, "@acme:registry=https://evil.example/\n")
    assert (decision.action, decision.content) == (WriteAction.REFUSE, None)
    assert "package manager" in decision.warnings[0]
