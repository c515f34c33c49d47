"""Deterministic fixes: each repairs only what is unambiguous, and validation agrees after."""

from __future__ import annotations

import json

import pytest

from app.postgen.fixes import (
    Fix,
    add_missing_dependencies,
    apply_fixes,
    fix_import_paths,
    imported_packages,
    restore_entrypoints,
    strip_fences,
)
from app.postgen.template_workspace import read_template_workspace
from app.postgen.validation import validate_project
from sandbox.images.templates import get_template

VITE = get_template("vite-react")
NEXT = get_template("nextjs")
TEMPLATE = read_template_workspace("vite-react")


# strip_fences


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("```jsx\nconst a = 1;\n```\n", "const a = 1;\n", id="wrapping"),
        pytest.param("```jsx\nconst a = 1;\n", "const a = 1;\n", id="lone-opening"),
        pytest.param("const a = 1;\n```\n", "const a = 1;\n", id="lone-closing"),
        pytest.param("\n\n```\nconst a = 1;\n```\n\n", "const a = 1;\n", id="blank-lines-around"),
    ],
)
def test_fences_around_code_are_stripped(content: str, expected: str) -> None:
    result = strip_fences({"src/a.js": content})

    assert result.changed == {"src/a.js": expected}
    assert result.fixes == [Fix("markdown_fence", "src/a.js", "removed a leftover markdown fence")]


@pytest.mark.parametrize(
    ("path", "content"),
    [
        pytest.param("README.md", "```bash\nnpm run dev\n```\n", id="markdown"),
        pytest.param("src/a.js", "const a = 1;\n", id="clean"),
        pytest.param("src/a.js", "const a = 1;\n```\nconst b = 2;\n", id="fence-in-the-middle"),
        pytest.param("node_modules/x/a.js", "```\nx\n```\n", id="node-modules"),
    ],
)
def test_files_without_edge_fences_are_left_alone(path: str, content: str) -> None:
    assert strip_fences({path: content}).changed == {}


# restore_entrypoints


def test_missing_boot_entrypoints_come_back_from_the_template() -> None:
    files = dict(TEMPLATE)
    del files["src/main.jsx"]
    del files["index.html"]

    result = restore_entrypoints(files, VITE, TEMPLATE)

    assert result.changed == {
        "index.html": TEMPLATE["index.html"],
        "src/main.jsx": TEMPLATE["src/main.jsx"],
    }


def test_the_root_component_is_never_restored() -> None:
    files = dict(TEMPLATE)
    del files["src/App.jsx"]

    assert restore_entrypoints(files, VITE, TEMPLATE).changed == {}


def test_a_typescript_entrypoint_counts_as_present() -> None:
    files = dict(TEMPLATE)
    files["src/main.tsx"] = files.pop("src/main.jsx")

    assert restore_entrypoints(files, VITE, TEMPLATE).changed == {}


def test_nextjs_layout_is_restored() -> None:
    template_files = read_template_workspace("nextjs")
    files = {path: text for path, text in template_files.items() if path != "app/layout.jsx"}

    result = restore_entrypoints(files, NEXT, template_files)

    assert list(result.changed) == ["app/layout.jsx"]


# fix_import_paths


@pytest.mark.parametrize(
    ("target", "source", "fixed"),
    [
        pytest.param(
            "src/Item.tsx",
            "import Item from './Item.jsx'",
            "import Item from './Item.tsx'",
            id="other-extension",
        ),
        pytest.param(
            "src/components/TodoItem.jsx",
            'import Item from "./components/todoItem"',
            'import Item from "./components/TodoItem"',
            id="letter-case-without-extension",
        ),
        pytest.param(
            "src/Styles/App.css",
            "import './styles/app.css'",
            "import './Styles/App.css'",
            id="asset-letter-case",
        ),
        pytest.param(
            "src/widgets/index.jsx",
            "import Item from './Widgets'",
            "import Item from './widgets'",
            id="directory-index",
        ),
        pytest.param(
            "lib/Item.js",
            "import Item from '../lib/item.js'",
            "import Item from '../lib/Item.js'",
            id="parent-folder",
        ),
    ],
)
def test_unambiguous_imports_are_rewritten(target: str, source: str, fixed: str) -> None:
    app = f"{source}\nexport default function App() {{ return <main /> }}\n"
    files = {**TEMPLATE, target: "export default 1\n", "src/App.jsx": app}

    result = fix_import_paths(files, VITE)

    assert result.changed == {"src/App.jsx": app.replace(source, fixed)}
    assert validate_project({**files, **result.changed}, VITE) == []


def test_an_ambiguous_import_is_left_alone() -> None:
    files = {
        **TEMPLATE,
        "src/App.jsx": "import Item from './item.jsx'\nexport default () => <Item />\n",
        "src/Item.tsx": "export default () => <li />\n",
        "src/ITEM.js": "export default () => <li />\n",
    }

    assert fix_import_paths(files, VITE).changed == {}


def test_packages_and_resolving_imports_are_not_touched() -> None:
    files = {**TEMPLATE, "src/App.jsx": "import { create } from 'zustand'\nimport './index.css'\n"}

    assert fix_import_paths(files, VITE).changed == {}


def test_html_script_extension_is_fixed() -> None:
    files = dict(TEMPLATE)
    files["src/main.tsx"] = files.pop("src/main.jsx")

    result = fix_import_paths(files, VITE)

    assert 'src="/src/main.tsx"' in result.changed["index.html"]


# add_missing_dependencies


def test_undeclared_imports_are_added_and_listed_for_install() -> None:
    files = dict(TEMPLATE)
    files["src/App.jsx"] = (
        "import { create } from 'zustand'\n"
        "import { useQuery } from '@tanstack/react-query/x'\n"
        "import fs from 'node:fs'\n"
        "import path from 'path'\n"
        "import { createRoot } from 'react-dom/client'\n"
    )

    result = add_missing_dependencies(files, VITE)

    assert result.packages_to_install == ["@tanstack/react-query", "zustand"]
    package = json.loads(result.changed["package.json"])
    assert package["dependencies"] == {
        "@tanstack/react-query": "latest",
        "react": "^18.3.1",
        "react-dom": "^18.3.1",
        "zustand": "latest",
    }
    assert package["devDependencies"] == json.loads(TEMPLATE["package.json"])["devDependencies"]
    assert result.changed["package.json"].endswith("}\n")


def test_declared_and_installed_packages_are_not_added() -> None:
    files = dict(TEMPLATE)
    files["src/App.jsx"] = "import { create } from 'zustand'\nimport c from 'clsx'\n"

    result = add_missing_dependencies(files, VITE, declared=["zustand@^4"], installed=["clsx"])

    assert result.changed == {}
    assert result.packages_to_install == []


def test_without_a_package_json_nothing_is_added() -> None:
    assert add_missing_dependencies({"src/a.js": "import x from 'x'\n"}, VITE).changed == {}


def test_imported_packages_include_config_files_and_skip_builtins() -> None:
    files = {**TEMPLATE, "src/store.js": 'import { create } from "zustand";\nimport "node:fs";\n'}

    assert imported_packages(files, VITE) == {
        "react",
        "react-dom",
        "zustand",
        "vite",
        "@vitejs/plugin-react",
    }


# apply_fixes


def test_apply_fixes_repairs_a_broken_project_until_it_validates() -> None:
    files = dict(TEMPLATE)
    del files["src/main.jsx"]
    del files["src/App.jsx"]
    files["src/App.tsx"] = (
        "```tsx\nimport Item from './components/item';\nimport { create } from 'zustand';\n"
        "export default function App() { return <Item /> }\n```\n"
    )
    files["src/components/Item.jsx"] = "export default function Item() { return <p>x</p> }\n"
    assert validate_project(files, VITE)

    report = apply_fixes(files, VITE, TEMPLATE)

    assert [fix.code for fix in report.fixes] == [
        "markdown_fence",
        "missing_entrypoint",
        "unresolved_import",
        "unresolved_import",
        "undeclared_package",
    ]
    assert set(report.changed) == {"src/App.tsx", "src/main.jsx", "package.json"}
    assert report.packages_to_install == ("zustand",)
    assert "import App from './App.tsx'" in report.changed["src/main.jsx"]
    assert validate_project(report.files, VITE) == []


def test_apply_fixes_on_a_clean_project_changes_nothing() -> None:
    report = apply_fixes(TEMPLATE, VITE, TEMPLATE)

    assert report.changed == {}
    assert report.fixes == ()
    assert report.files == TEMPLATE
