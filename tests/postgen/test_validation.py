"""Validation of generated projects: the recordings are clean, each rule fires, nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.postgen.template_workspace import read_template_workspace
from app.postgen.validation import (
    Finding,
    edge_fence_lines,
    fence_lines,
    renders_nothing,
    validate_project,
)
from parser import StreamParser
from sandbox.images.templates import get_template

RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"
VITE = get_template("vite-react")


def parsed(text: str) -> tuple[dict[str, str], list[str]]:
    """The files and install specs a recorded answer produces."""
    parser = StreamParser()
    files: dict[str, str] = {}
    specs: list[str] = []
    for event in parser.feed(text) + parser.close():
        data = event.to_dict()
        if data["type"] == "file_start":
            files[data["path"]] = ""
        elif data["type"] == "file_content":
            files[data["path"]] += data["content"]
        elif data["type"] == "install_content":
            specs += data["dependencies"]
    return files, specs


def vite(files: dict[str, str], **options: list[str]) -> list[Finding]:
    return validate_project({**read_template_workspace("vite-react"), **files}, VITE, **options)


def codes(findings: list[Finding]) -> list[tuple[str, str, int | None]]:
    return [(f.code, f.path, f.line) for f in findings]


@pytest.mark.parametrize("template", ["vite-react", "nextjs", "vanilla"])
def test_every_template_is_clean_on_its_own(template: str) -> None:
    assert validate_project(read_template_workspace(template), get_template(template)) == []


def test_the_todo_recording_is_clean_with_its_install_block() -> None:
    files, specs = parsed((RECORDINGS / "todo-vite-react.txt").read_text())

    assert specs == ["zustand"]
    assert vite(files, declared=specs) == []


def test_the_todo_recording_without_its_install_names_the_package() -> None:
    files, _ = parsed((RECORDINGS / "todo-vite-react.txt").read_text())

    assert codes(vite(files)) == [("undeclared_package", "src/store.js", 1)]


def test_an_installed_package_counts_as_declared() -> None:
    files, _ = parsed((RECORDINGS / "todo-vite-react.txt").read_text())

    assert vite(files, installed=["zustand"]) == []


def test_the_search_then_build_recording_is_clean() -> None:
    lines = (RECORDINGS / "search-then-build.jsonl").read_text().splitlines()
    files, _ = parsed(json.loads(lines[1])["text"])

    assert vite(files) == []


def test_the_adversarial_recording_is_clean_once_parsed() -> None:
    files, specs = parsed((RECORDINGS / "adversarial.txt").read_text())

    assert "src/fenced.jsx" in files
    assert vite(files, declared=specs) == []


def test_a_finding_is_json_ready() -> None:
    finding = Finding("markdown_fence", "src/App.jsx", 1, "fence")

    assert finding.to_dict() == {
        "code": "markdown_fence",
        "path": "src/App.jsx",
        "line": 1,
        "message": "fence",
    }


# missing_entrypoint


def test_a_missing_entrypoint_is_reported() -> None:
    files = read_template_workspace("vite-react")
    del files["src/main.jsx"]

    findings = validate_project(files, VITE)

    assert ("missing_entrypoint", "src/main.jsx", None) in codes(findings)


def test_a_typescript_variant_stands_in_for_a_script_entrypoint() -> None:
    files = read_template_workspace("vite-react")
    del files["src/App.jsx"]
    files["src/App.tsx"] = "export default function App() { return <main>hi</main> }\n"
    files["src/main.jsx"] = files["src/main.jsx"].replace("./App.jsx", "./App.tsx")

    assert validate_project(files, VITE) == []


# invalid_package_json


@pytest.mark.parametrize("text", ["{", "[]"], ids=["broken", "not-an-object"])
def test_an_invalid_package_json(text: str) -> None:
    assert ("invalid_package_json", "package.json", None) in codes(vite({"package.json": text}))


# unresolved_import and undeclared_package


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("import X from './X.jsx'", "unresolved_import", id="missing-file"),
        pytest.param("import x from './app'", "unresolved_import", id="wrong-case"),
        pytest.param("import B from '@/components/B'", "unresolved_import", id="vite-alias"),
        pytest.param("import R from 'React'", "unresolved_import", id="invalid-name"),
        pytest.param("import _ from 'lodash'", "undeclared_package", id="undeclared"),
        pytest.param("import q from '@tanstack/react-query'", "undeclared_package", id="scoped"),
        pytest.param("import './missing.css'", "unresolved_import", id="missing-css"),
        pytest.param("const P = lazy(() => import('./P'))", "unresolved_import", id="dynamic"),
    ],
)
def test_bad_imports(source: str, expected: str) -> None:
    findings = vite({"src/App.jsx": f"{source}\nexport default () => <main />\n"})

    assert codes(findings) == [(expected, "src/App.jsx", 1)]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import { createRoot } from 'react-dom/client'", id="declared-subpath"),
        pytest.param("import { jsx } from 'react/jsx-runtime'", id="react-subpath"),
        pytest.param("import fs from 'node:fs'", id="node-scheme"),
        pytest.param("import path from 'path'", id="builtin"),
        pytest.param("import confetti from 'https://esm.sh/canvas-confetti@1'", id="url"),
        pytest.param("import { registerSW } from 'virtual:pwa-register'", id="virtual"),
        pytest.param("import './index.css'", id="css"),
        pytest.param("import logo from '/favicon.svg'", id="public-asset"),
        pytest.param("import M from './main.jsx?raw'", id="query"),
        pytest.param("const s = \"import x from 'nope'\"", id="in-a-string"),
        pytest.param("// import x from 'nope'", id="in-a-comment"),
        pytest.param("import type { T } from 'not-installed'", id="type-only"),
        pytest.param("const P = import(`./pages/${name}.jsx`)", id="computed"),
        pytest.param('const p = <p>You can import data from "file.csv"</p>', id="jsx-prose"),
    ],
)
def test_imports_that_are_fine(source: str) -> None:
    files = {
        "src/App.jsx": f"{source}\nexport default () => <main />\n",
        "public/favicon.svg": "<svg/>",
    }

    assert vite(files) == []


def test_css_and_html_references_are_checked() -> None:
    files = {
        "src/index.css": '@import "./theme.css";\nbody { margin: 0; }\n',
        "index.html": '<html><body><div id="root"></div>'
        '<script type="module" src="/src/main.tsx"></script></body></html>\n',
    }

    findings = codes(vite(files))

    assert ("unresolved_import", "index.html", 1) in findings
    assert ("unresolved_import", "src/index.css", 1) in findings


def test_a_css_package_import_must_be_declared() -> None:
    findings = vite({"src/index.css": '@import "tailwindcss";\n'})

    assert codes(findings) == [("undeclared_package", "src/index.css", 1)]


def test_nextjs_alias_imports_resolve() -> None:
    page = 'import Counter from "@/components/Counter";\nexport default () => <Counter />\n'
    files = {
        **read_template_workspace("nextjs"),
        "app/page.jsx": page,
        "components/Counter.jsx": '"use client";\nexport default function C() { return <b /> }\n',
    }

    assert validate_project(files, get_template("nextjs")) == []


def test_nextjs_alias_to_a_missing_file() -> None:
    files = {**read_template_workspace("nextjs"), "app/page.jsx": 'import X from "@/lib/x";\n'}

    findings = validate_project(files, get_template("nextjs"))

    assert ("unresolved_import", "app/page.jsx", 1) in codes(findings)


def test_vanilla_pages_check_their_scripts_and_styles() -> None:
    page = (
        '<html><head><link rel="stylesheet" href="styles.css"></head>\n'
        '<body><main>hi</main><script type="module" src="main.js"></script></body></html>\n'
    )
    files = {**read_template_workspace("vanilla"), "index.html": page, "styles.css": "a{}"}

    findings = validate_project(files, get_template("vanilla"))

    assert codes(findings) == [("unresolved_import", "index.html", 2)]


def test_node_modules_and_build_output_are_not_checked() -> None:
    files = {
        "node_modules/x/index.js": "import y from 'undeclared'\n// ... rest of the code\n",
        "dist/assets/index.js": "```\n",
    }

    assert vite(files) == []


# markdown_fence


def test_fences_in_code_files_are_reported_with_their_lines() -> None:
    files = {"src/App.jsx": "```jsx\nexport default () => <main />\n```\n"}

    assert codes(vite(files)) == [
        ("markdown_fence", "src/App.jsx", 1),
        ("markdown_fence", "src/App.jsx", 3),
    ]


@pytest.mark.parametrize(
    ("path", "content"),
    [
        pytest.param("README.md", "# App\n\n```bash\nnpm run dev\n```\n", id="markdown"),
        pytest.param(
            "src/App.jsx",
            "const md = `\\`\\`\\`js\nx\n\\`\\`\\``\nexport default () => <pre>{md}</pre>\n",
            id="escaped-in-a-template",
        ),
        pytest.param(
            "src/App.jsx",
            "/**\n * ```js\n * use()\n * ```\n */\nexport default () => <main />\n",
            id="in-jsdoc",
        ),
        pytest.param(
            "src/about.html",
            "<html><body>\n<pre>\n```\ncode\n```\n</pre>\n</body></html>\n",
            id="html-pre-in-the-middle",
        ),
    ],
)
def test_fences_that_are_content_are_not_reported(path: str, content: str) -> None:
    assert vite({path: content}) == []


def test_fence_line_helpers() -> None:
    assert fence_lines("a\n```js\nb\n  ~~~  \n") == [2, 4]
    assert edge_fence_lines("\n```html\n<p>\n```\n<p>\n```\n\n") == [2, 6]
    assert edge_fence_lines("") == []


# placeholder_stub


@pytest.mark.parametrize(
    ("path", "content", "line"),
    [
        pytest.param(
            "src/App.jsx",
            "export default function App() {\n  // ... rest of the code\n}\n",
            2,
            id="js",
        ),
        pytest.param(
            "src/App.jsx",
            "export default () => (\n  <main>\n    {/* ... */}\n  </main>\n)\n",
            3,
            id="jsx-comment",
        ),
        pytest.param("src/index.css", "a { color: red }\n/* existing styles ... */\n", 2, id="css"),
        pytest.param(
            "index.html",
            '<html><body><div id="root"></div>\n<!-- ... -->\n'
            '<script type="module" src="/src/main.jsx"></script></body></html>\n',
            2,
            id="html",
        ),
        pytest.param(
            "src/api.js", "export function load() {\n  // TODO: implement\n}\n", 2, id="todo"
        ),
    ],
)
def test_placeholder_stubs(path: str, content: str, line: int) -> None:
    assert codes(vite({path: content})) == [("placeholder_stub", path, line)]


ORDINARY_APP = r"""import { useEffect, useMemo, useState } from "react";

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const QUOTES = /["'`]/g;
const half = (a, b) => (a + b) / 2; // average
const url = `https://api.example.com/items?q=${encodeURIComponent("a/b")}`;

/**
 * Formats a duration.
 * @example
 * format(90) // "1:30"
 */
export function format(seconds) {
  const m = Math.floor(seconds / 60);
  return `${m}:${String(seconds % 60).padStart(2, "0")}`;
}

// TODO list item component
function Item({ text }) {
  // TODO: add drag and drop later
  return <li>Don't forget: {text}</li>;
}

export default function App() {
  const [email, setEmail] = useState("");
  const [items, setItems] = useState(null);
  const valid = useMemo(() => EMAIL.test(email), [email]);
  useEffect(() => {
    // Loading...
    const id = setTimeout(() => setItems(["a", "b"]), 100);
    return () => clearTimeout(id);
  }, []);
  if (!items) return null;
  return (
    <main>
      {/* Header */}
      <h1>It's {format(90)} o'clock</h1>
      <input placeholder="Email" aria-label="Email" onChange={(e) => setEmail(e.target.value)} />
      <textarea placeholder="// your code here" />
      {valid ? <span>ok</span> : <span>"invalid"</span>}
      <a href={url}>docs</a> <span>/</span>
      <p>Write "... rest of the code" here to test.</p>
      <ul>{items.map((t) => <Item key={t} text={t.replace(QUOTES, "")} />)}</ul>
    </main>
  );
}
"""
ORDINARY_CSS = """/* Layout */
:root { --accent: #3b82f6; }
/* TODO list styles */
.todo::before { content: "// ... "; }
"""


def test_ordinary_code_raises_no_alarm() -> None:
    assert vite({"src/App.jsx": ORDINARY_APP, "src/index.css": ORDINARY_CSS}) == []


# empty_root_component


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("", id="empty-file"),
        pytest.param("export default function App() {\n  return null;\n}\n", id="null"),
        pytest.param("export default function App() { return <></> }\n", id="fragment"),
        pytest.param("const App = () => (\n  <>\n  </>\n);\nexport default App;\n", id="arrow"),
        pytest.param(
            "import { Fragment } from 'react';\n"
            "export default function App() { return <Fragment></Fragment> }\n",
            id="named-fragment",
        ),
    ],
)
def test_an_empty_root_component(source: str) -> None:
    findings = codes(vite({"src/App.jsx": source}))

    assert ("empty_root_component", "src/App.jsx", None) in findings


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "export default function App({ ready }) {\n  if (!ready) return null;\n"
            "  return <main>ok</main>;\n}\n",
            id="null-while-loading",
        ),
        pytest.param("export default function App() { return <Router /> }\n", id="component"),
        pytest.param(
            "import { createElement } from 'react';\n"
            "export default function App() { return createElement('main') }\n",
            id="no-jsx",
        ),
    ],
)
def test_a_root_component_that_renders_something(source: str) -> None:
    assert vite({"src/App.jsx": source}) == []


def test_renders_nothing_ignores_jsx_in_comments() -> None:
    assert renders_nothing("// <main>old</main>\nexport default () => null\n")


def test_an_empty_vanilla_body() -> None:
    page = "<html><body>\n  <!-- nothing yet -->\n</body></html>\n"
    files = {**read_template_workspace("vanilla"), "index.html": page}

    findings = validate_project(files, get_template("vanilla"))

    assert codes(findings) == [("empty_root_component", "index.html", None)]


def test_findings_are_sorted_and_deterministic() -> None:
    files = {
        "src/b.js": "import x from './x'\n// ... rest of the code\n",
        "src/a.js": "```\nimport y from 'nope'\n",
    }

    first = vite(files)

    assert first == vite(dict(reversed(files.items())))
    assert [f.path for f in first] == sorted(f.path for f in first)
