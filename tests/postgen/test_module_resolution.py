"""Import resolution by the template's bundler rules."""

from __future__ import annotations

import json

import pytest

from app.postgen.module_resolution import (
    Kind,
    Project,
    Resolution,
    declared_packages,
    package_name,
    resolve_path,
    spec_name,
)
from app.postgen.source_scan import ImportRef

FILES = {
    "index.html": "",
    "package.json": json.dumps(
        {"dependencies": {"react": "^18"}, "devDependencies": {"vite": "5"}}
    ),
    "src/App.jsx": "",
    "src/main.jsx": "",
    "src/util.ts": "",
    "src/components/index.js": "",
    "src/components/Button.tsx": "",
    "src/logo.svg": "",
    "src/data.json": "",
    "public/favicon.svg": "",
    "lib/helper.mjs": "",
}


def resolve(
    importer: str, spec: str, files: dict[str, str] = FILES, template: str = "vite-react"
) -> Resolution:
    return Project.from_files(files, template).resolve(importer, spec)


@pytest.mark.parametrize(
    ("importer", "spec", "target"),
    [
        pytest.param("src/main.jsx", "./App.jsx", "src/App.jsx", id="exact"),
        pytest.param("src/main.jsx", "./App", "src/App.jsx", id="extension-added"),
        pytest.param("src/main.jsx", "./util", "src/util.ts", id="ts-extension"),
        pytest.param("src/main.jsx", "./components", "src/components/index.js", id="dir-index"),
        pytest.param("src/components/index.js", "./Button", "src/components/Button.tsx", id="tsx"),
        pytest.param("src/components/index.js", "../App.jsx", "src/App.jsx", id="parent"),
        pytest.param("src/App.jsx", "./logo.svg?react", "src/logo.svg", id="query-stripped"),
        pytest.param("src/App.jsx", "./data.json", "src/data.json", id="json"),
        pytest.param("src/App.jsx", "../lib/helper", "lib/helper.mjs", id="mjs"),
        pytest.param("index.html", "/src/main.jsx", "src/main.jsx", id="root-relative"),
        pytest.param("src/App.jsx", "/favicon.svg", "public/favicon.svg", id="public-dir"),
        pytest.param("src/components/Button.tsx", "../util.js", "src/util.ts", id="ts-js-output"),
    ],
)
def test_files_resolve(importer: str, spec: str, target: str) -> None:
    resolution = resolve(importer, spec)

    assert resolution.kind is Kind.FILE
    assert resolution.target == target


@pytest.mark.parametrize(
    ("importer", "spec", "looked_for"),
    [
        pytest.param("src/main.jsx", "./app", "src/app", id="case-matters"),
        pytest.param("src/main.jsx", "./Missing.jsx", "src/Missing.jsx", id="missing"),
        pytest.param("src/App.jsx", "./util.js", "src/util.js", id="js-to-ts-only-from-ts"),
        pytest.param("src/App.jsx", "/nope.png", "nope.png", id="root-missing"),
        pytest.param("src/App.jsx", "../../outside", None, id="leaves-the-project"),
    ],
)
def test_missing_files(importer: str, spec: str, looked_for: str | None) -> None:
    resolution = resolve(importer, spec)

    assert resolution.kind is Kind.MISSING_FILE
    assert resolution.target == looked_for


@pytest.mark.parametrize(
    ("spec", "kind", "package"),
    [
        pytest.param("react", Kind.PACKAGE, "react", id="bare"),
        pytest.param("react-dom/client", Kind.PACKAGE, "react-dom", id="subpath"),
        pytest.param("@tanstack/react-query", Kind.PACKAGE, "@tanstack/react-query", id="scoped"),
        pytest.param(
            "@mui/icons-material/Add", Kind.PACKAGE, "@mui/icons-material", id="scoped-sub"
        ),
        pytest.param("fs", Kind.BUILTIN, "fs", id="builtin"),
        pytest.param("fs/promises", Kind.BUILTIN, "fs", id="builtin-subpath"),
        pytest.param("node:path", Kind.EXTERNAL, None, id="node-scheme"),
        pytest.param("virtual:pwa-register", Kind.EXTERNAL, None, id="virtual"),
        pytest.param("https://esm.sh/canvas-confetti@1", Kind.EXTERNAL, None, id="url"),
        pytest.param("//cdn.example/x.js", Kind.EXTERNAL, None, id="protocol-relative"),
        pytest.param("React", Kind.INVALID_PACKAGE, None, id="upper-case"),
        pytest.param("@/components/Button", Kind.INVALID_PACKAGE, None, id="alias-without-config"),
    ],
)
def test_bare_specifiers(spec: str, kind: Kind, package: str | None) -> None:
    resolution = resolve("src/App.jsx", spec)

    assert resolution.kind is kind
    assert resolution.package == package


def test_subpath_imports_need_package_json_imports() -> None:
    with_imports = {**FILES, "package.json": json.dumps({"imports": {"#db": "./lib/helper.mjs"}})}

    assert resolve("src/App.jsx", "#db").kind is Kind.MISSING_FILE
    assert resolve("src/App.jsx", "#db", with_imports).kind is Kind.EXTERNAL


NEXT_FILES = {
    "jsconfig.json": json.dumps({"compilerOptions": {"paths": {"@/*": ["./*"]}}}),
    "app/page.jsx": "",
    "components/Counter.jsx": "",
}


def test_nextjs_honours_jsconfig_paths() -> None:
    resolution = resolve("app/page.jsx", "@/components/Counter", NEXT_FILES, "nextjs")

    assert resolution.kind is Kind.FILE
    assert resolution.target == "components/Counter.jsx"


def test_an_alias_that_names_no_file_is_missing() -> None:
    resolution = resolve("app/page.jsx", "@/components/Nope", NEXT_FILES, "nextjs")

    assert resolution.kind is Kind.MISSING_FILE
    assert resolution.target == "components/Nope"


def test_vite_ignores_jsconfig_paths() -> None:
    files = {**NEXT_FILES, "src/App.jsx": ""}

    assert resolve("src/App.jsx", "@/components/Counter", files).kind is Kind.INVALID_PACKAGE


def test_tsconfig_base_url_and_paths() -> None:
    options = {"baseUrl": "src", "paths": {"~/*": ["lib/*"]}}
    files = {
        "tsconfig.json": json.dumps({"compilerOptions": options}),
        "src/lib/a.ts": "",
        "src/components/B.tsx": "",
        "app/page.tsx": "",
    }

    assert resolve("app/page.tsx", "~/a", files, "nextjs").target == "src/lib/a.ts"
    assert resolve("app/page.tsx", "components/B", files, "nextjs").target == "src/components/B.tsx"
    assert resolve("app/page.tsx", "lodash", files, "nextjs").kind is Kind.PACKAGE


def test_resolve_path_order_prefers_the_exact_file() -> None:
    files = {"a", "a.js", "a/index.js"}

    assert resolve_path(files, "a") == "a"
    assert resolve_path(files - {"a"}, "a") == "a.js"
    assert resolve_path({"a/index.js"}, "a") == "a/index.js"


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        pytest.param("lodash", "lodash", id="plain"),
        pytest.param("lodash/fp", "lodash", id="subpath"),
        pytest.param("@a/b/c", "@a/b", id="scoped"),
        pytest.param("@a", None, id="scope-only"),
        pytest.param("Bad", None, id="upper-case"),
    ],
)
def test_package_name(spec: str, name: str | None) -> None:
    assert package_name(spec) == name


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        pytest.param("zustand", "zustand", id="plain"),
        pytest.param("zustand@^4.5.0", "zustand", id="versioned"),
        pytest.param("@tanstack/react-query@5", "@tanstack/react-query", id="scoped-versioned"),
        pytest.param("@tanstack/react-query", "@tanstack/react-query", id="scoped"),
    ],
)
def test_spec_name(spec: str, name: str) -> None:
    assert spec_name(spec) == name


def test_declared_packages_reads_every_section_and_tolerates_garbage() -> None:
    assert declared_packages(FILES) == {"react", "vite"}
    assert declared_packages({"package.json": "{not json"}) == set()
    assert declared_packages({"package.json": "[1, 2]"}) == set()
    assert declared_packages({}) == set()


@pytest.mark.parametrize(
    ("kind", "spec", "expected", "target"),
    [
        pytest.param(
            "script", "src/main.jsx", Kind.FILE, "src/main.jsx", id="html-bare-is-relative"
        ),
        pytest.param("stylesheet", "theme.css", Kind.MISSING_FILE, "theme.css", id="html-missing"),
        pytest.param("css", "src/logo.svg", Kind.FILE, "src/logo.svg", id="css-relative-first"),
        pytest.param("css", "tailwindcss", Kind.PACKAGE, None, id="css-package"),
        pytest.param("import", "src/main.jsx", Kind.PACKAGE, None, id="js-bare-is-a-package"),
    ],
)
def test_resolve_ref_follows_the_kind_of_reference(
    kind: str, spec: str, expected: Kind, target: str | None
) -> None:
    resolution = Project.from_files(FILES, "vite-react").resolve_ref(
        "index.html", ImportRef(spec, 1, kind)
    )

    assert resolution.kind is expected
    assert resolution.target == target
