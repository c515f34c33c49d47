"""The lexer behind validation: imports and comments found in code, never in strings."""

from __future__ import annotations

import pytest

from app.postgen.source_scan import (
    blank_fences,
    css_imports,
    html_imports,
    imports_and_comments,
    js_imports,
    scan_js,
)


def specifiers(source: str) -> list[str]:
    return [ref.specifier for ref in js_imports(source)[0]]


def comment_texts(source: str) -> list[str]:
    return [comment.text.strip() for comment in js_imports(source)[1]]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param('import React from "react";', ["react"], id="default"),
        pytest.param("import { a, b } from './x.js'", ["./x.js"], id="named"),
        pytest.param("import a, { b,\n  c,\n} from './multi'", ["./multi"], id="multi-line"),
        pytest.param("import * as m from 'm'", ["m"], id="namespace"),
        pytest.param("import d, * as m from 'm'", ["m"], id="default-and-namespace"),
        pytest.param("import './index.css'", ["./index.css"], id="side-effect"),
        pytest.param("export * from './y'", ["./y"], id="export-star"),
        pytest.param("export { z } from 'z/sub';", ["z/sub"], id="export-named"),
        pytest.param("const A = lazy(() => import('./A.jsx'))", ["./A.jsx"], id="dynamic"),
        pytest.param("const fs = require('fs')", ["fs"], id="require"),
        pytest.param("import x from 'a'; import y from 'b'", ["a", "b"], id="two-on-a-line"),
        pytest.param("import type { T } from './types'", [], id="type-only-skipped"),
        pytest.param("const url = import.meta.env.BASE_URL", [], id="import-meta"),
        pytest.param("loader.require('x')", [], id="method-named-require"),
        pytest.param("import(`./pages/${name}.jsx`)", [], id="template-specifier-skipped"),
        pytest.param("const s = \"import q from 'nope'\"", [], id="inside-a-string"),
        pytest.param("const s = `\nimport q from 'nope'\n`", [], id="inside-a-template"),
        pytest.param("// import fake from 'comment'", [], id="inside-a-line-comment"),
        pytest.param("/*\nimport fake from 'c'\n*/", [], id="inside-a-block-comment"),
        pytest.param('<p>You can import data from "file.csv"</p>', [], id="jsx-prose"),
    ],
)
def test_imports(source: str, expected: list[str]) -> None:
    assert specifiers(source) == expected


def test_import_lines_are_reported() -> None:
    refs, _ = js_imports("// header\n\nimport a from 'a'\nimport('./b')\n")

    assert [(ref.specifier, ref.line, ref.kind) for ref in refs] == [
        ("a", 3, "import"),
        ("./b", 4, "dynamic"),
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("x = 1 // note", ["note"], id="line"),
        pytest.param("/* a\n b */", ["a\n b"], id="block"),
        pytest.param("<div>{/* ... */}</div>", ["..."], id="jsx-comment"),
        pytest.param('const u = "https://example.com" // real', ["real"], id="url-in-string"),
        pytest.param("const r = /\\/\\/ not a comment/g; // yes", ["yes"], id="regex-slashes"),
        pytest.param("const r = /[/]/; // after class", ["after class"], id="regex-class"),
        pytest.param("a = b / c / d // div", ["div"], id="division"),
        pytest.param("const t = `a ${b /* in */} // not`\n// out", ["in", "out"], id="template"),
        pytest.param("const t = `${`${'x'}`}` // nested", ["nested"], id="nested-templates"),
        pytest.param("<p>Don't worry</p>\n// after", ["after"], id="jsx-apostrophe"),
        pytest.param("</div> // closing tag", ["closing tag"], id="jsx-closing-tag"),
        pytest.param('<span>{n < 2 ? "<" : ">"}</span> // cmp', ["cmp"], id="comparison-in-jsx"),
        pytest.param("<Item key={id} /> // self-closing", ["self-closing"], id="self-closing"),
        pytest.param("return /re/.test(x) // kw", ["kw"], id="regex-after-return"),
    ],
)
def test_comments(source: str, expected: list[str]) -> None:
    assert comment_texts(source) == expected


def test_masking_keeps_offsets_and_lines() -> None:
    source = 'a = "x\\"y" /* c\n */ + 1'
    scan = scan_js(source)

    assert len(scan.masked) == len(source)
    assert scan.masked.count("\n") == 1
    assert scan.strings[4] == 'x\\"y'
    assert "c" not in scan.masked


def test_an_unterminated_string_ends_at_the_line() -> None:
    assert specifiers("const s = 'oops\nimport a from 'a'") == ["a"]


def test_a_leftover_fence_does_not_hide_the_imports() -> None:
    source = "```jsx\nimport a from './a.jsx'\n```\n"

    assert specifiers(source) == ["./a.jsx"]
    assert len(blank_fences(source)) == len(source)


def test_css_imports_and_comments() -> None:
    refs, comments = css_imports(
        '@import "./a.css";\n/* note */ @import url(b.css);\n@import url("https://f.io/x");'
    )

    assert [(ref.specifier, ref.line) for ref in refs] == [
        ("./a.css", 1),
        ("https://f.io/x", 3),
        ("b.css", 2),
    ]
    assert [comment.text for comment in comments] == [" note "]


def test_css_has_no_line_comments() -> None:
    _, comments = css_imports("a { background: url(//cdn.example/x.png); }")

    assert comments == []


def test_html_scripts_stylesheets_inline_modules_and_comments() -> None:
    page = (
        "<!doctype html>\n<html><head>\n"
        '<link rel="stylesheet" href="styles.css">\n'
        '<link rel="icon" href="/favicon.svg">\n'
        "</head><body>\n<!-- ... -->\n"
        '<script type="module" src="/src/main.jsx"></script>\n'
        '<script type="module">\nimport { go } from "./go.js";\n// inline\n</script>\n'
        '<script type="application/ld+json">{"import": "x"}</script>\n'
        "</body></html>\n"
    )

    refs, comments = html_imports(page)

    assert [(ref.specifier, ref.line, ref.kind) for ref in refs] == [
        ("styles.css", 3, "stylesheet"),
        ("/src/main.jsx", 7, "script"),
        ("./go.js", 9, "import"),
    ]
    assert [(comment.text.strip(), comment.line) for comment in comments] == [
        ("...", 6),
        ("inline", 10),
    ]


@pytest.mark.parametrize(
    ("path", "scanned"),
    [
        pytest.param("src/App.tsx", True, id="tsx"),
        pytest.param("src/index.css", True, id="css"),
        pytest.param("index.html", True, id="html"),
        pytest.param("README.md", False, id="markdown"),
        pytest.param("public/logo.svg", False, id="svg"),
    ],
)
def test_dispatch_by_extension(path: str, scanned: bool) -> None:
    assert (imports_and_comments(path, "") is not None) == scanned
