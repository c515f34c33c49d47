"""Parser cases shared by the stream tests: input text and the merged events it must give.

Events are written as compact tuples and expanded by :func:`expected`; every case runs whole,
one character at a time, and with random splits.
"""

from __future__ import annotations

from typing import Any

import pytest

Row = tuple[Any, ...]


def expected(rows: list[Row]) -> list[dict[str, Any]]:
    """Expand ``("file", "a.js", "body")`` shorthands into full event dicts."""
    out: list[dict[str, Any]] = []
    for row in rows:
        kind, *rest = row
        out.extend(_EXPAND[kind](*rest))
    return out


def _file(path: str, body: str | None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "file_start", "path": path}]
    if body:
        events.append({"type": "file_content", "path": path, "content": body})
    events.append({"type": "file_end", "path": path})
    return events


def _edit(path: str, *blocks: tuple[str, str] | str) -> list[dict[str, Any]]:
    """An edit: ``(search, replace)`` blocks, or an error code where the parser reports one."""
    events: list[dict[str, Any]] = [{"type": "edit_start", "path": path}]
    for block in blocks:
        if isinstance(block, str):
            events.append({"type": "error", "code": block})
        else:
            search, replace = block
            events.append(
                {"type": "edit_block", "path": path, "search": search, "replace": replace}
            )
    events.append({"type": "edit_end", "path": path})
    return events


def _error(code: str, _message_part: str = "") -> list[dict[str, Any]]:
    return [{"type": "error", "code": code}]


_EXPAND: dict[str, Any] = {
    "text": lambda c: [{"type": "text", "content": c}],
    "think": lambda c: [
        {"type": "thinking_start"},
        *([{"type": "thinking_content", "content": c}] if c else []),
        {"type": "thinking_end"},
    ],
    "sandbox": lambda project=None, base=None: [
        {"type": "sandbox_start", "project": project, "base": base}
    ],
    "end_sandbox": lambda: [{"type": "sandbox_end"}],
    "file": _file,
    "install": lambda deps, framework=None: [
        {"type": "install_start"},
        {"type": "install_content", "dependencies": deps, "framework": framework},
        {"type": "install_end"},
    ],
    "command": lambda command, args: [{"type": "command", "command": command, "args": args}],
    "search": lambda q, n=5: [{"type": "web_search", "query": q, "max_results": n}],
    "scrape": lambda url: [{"type": "url_scrape", "url": url}],
    "done": lambda: [{"type": "done"}],
    "edit": _edit,
    "read": lambda path: [{"type": "read", "path": path}],
    "error": _error,
    "raw": lambda event: [event],
}

SB = '<edward_sandbox project="p">'
SB_END = "</edward_sandbox>"

CASES = [
    pytest.param("Hello world", [("text", "Hello world")], id="plain-text"),
    pytest.param(
        "<Thinking>plan</Thinking>after",
        [("think", "plan"), ("text", "after")],
        id="thinking",
    ),
    pytest.param(
        "<THINKING>a</thinking><thinking>b</THINKING>",
        [("think", "a"), ("think", "b")],
        id="tag-names-case-insensitive",
    ),
    pytest.param("<Thinking></Thinking>", [("think", "")], id="empty-thinking"),
    pytest.param("<Response>\nHi</Response>", [("text", "\nHi")], id="response-wrapper-consumed"),
    pytest.param(
        f'{SB}<file path="a.js">x</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "x"), ("end_sandbox",)],
        id="sandbox-with-file",
    ),
    pytest.param(
        "<edward_sandbox project='p' base='vite-react'></edward_sandbox>",
        [("sandbox", "p", "vite-react"), ("end_sandbox",)],
        id="single-quoted-attributes",
    ),
    pytest.param(
        "<edward_sandbox project=p base=vite-react></edward_sandbox>",
        [("sandbox", "p", "vite-react"), ("end_sandbox",)],
        id="unquoted-attributes",
    ),
    pytest.param(
        '<edward_sandbox project=\\"p\\" base=\\"b\\"></edward_sandbox>',
        [("sandbox", "p", "b"), ("end_sandbox",)],
        id="backslash-escaped-quotes",
    ),
    pytest.param(
        f'{SB}<file filepath="wrong.js" data-path="x" PATH="right.js">y</file>{SB_END}',
        [("sandbox", "p"), ("file", "right.js", "y"), ("end_sandbox",)],
        id="attributes-matched-on-whole-names",
    ),
    pytest.param(
        """<edward_command command="node" args='["a>b", "c"]'>""",
        [("command", "node", ["a>b", "c"])],
        id="gt-inside-quoted-attribute",
    ),
    pytest.param(
        f'{SB}<file path="a.js"><![CDATA[\nconst s = "</file>";\n]]></file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", 'const s = "</file>";\n'), ("end_sandbox",)],
        id="cdata-body-holds-close-tag",
    ),
    pytest.param(
        f'{SB}<file path="a.js">\n  <![CDATA[x]]>\n  </file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "x"), ("end_sandbox",)],
        id="cdata-whitespace-around-is-markup",
    ),
    pytest.param(
        f'{SB}<file path="a.js"><![CDATA[x]]> tail</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "x tail"), ("end_sandbox",)],
        id="content-after-cdata-kept",
    ),
    pytest.param(
        "a<edward_done/>b<edward_done />c<EDWARD_DONE>d<edward_done></edward_done>",
        [
            ("text", "a"),
            ("done",),
            ("text", "b"),
            ("done",),
            ("text", "c"),
            ("done",),
            ("text", "d"),
            ("done",),
        ],
        id="done-spellings",
    ),
    pytest.param(
        "if a < b and x<y then <div> or <<>> ok",
        [("text", "if a < b and x<y then <div> or <<>> ok")],
        id="angle-brackets-in-prose",
    ),
    pytest.param("trailing <", [("text", "trailing <")], id="trailing-lt-at-close"),
    pytest.param(
        f'{SB}<file path="a.jsx">\n```jsx\nconst a = <b/>;\n```\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.jsx", "const a = <b/>;\n"), ("end_sandbox",)],
        id="fence-wrapping-file-removed",
    ),
    pytest.param(
        f'{SB}<file path="a.js">```\nx\n```</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "x\n"), ("end_sandbox",)],
        id="fence-closing-without-newline",
    ),
    pytest.param(
        f'{SB}<file path="README.md">\n# T\n\n```sh\nnpm i\n```\n\nEnd\n</file>{SB_END}',
        [
            ("sandbox", "p"),
            ("file", "README.md", "# T\n\n```sh\nnpm i\n```\n\nEnd\n"),
            ("end_sandbox",),
        ],
        id="inner-fences-kept",
    ),
    pytest.param(
        f'{SB}<file path="a.js">```js\nlet s = "```";\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", 'let s = "```";\n'), ("end_sandbox",)],
        id="fence-without-closing-keeps-body",
    ),
    pytest.param(
        f'{SB}<file path="a.py">\n~~~python\nprint(1)\n~~~\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.py", "print(1)\n"), ("end_sandbox",)],
        id="tilde-fence-wrapping-file-removed",
    ),
    pytest.param(
        f'{SB}<file path="a.md">````md\n```js\nx\n```\n````\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.md", "```js\nx\n```\n"), ("end_sandbox",)],
        id="longer-fence-wraps-inner-fences",
    ),
    pytest.param(
        f'{SB}<file path="a.js">````js\nx\n```\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "x\n```\n"), ("end_sandbox",)],
        id="shorter-closing-fence-is-content",
    ),
    pytest.param(
        f'{SB}<file path="a.js">```js\nx\n~~~\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "x\n~~~\n"), ("end_sandbox",)],
        id="other-fence-character-is-content",
    ),
    pytest.param(
        f'{SB}<file path="a.md">```js x\ny\n```\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.md", "```js x\ny\n```\n"), ("end_sandbox",)],
        id="fence-with-prose-info-is-not-a-fence",
    ),
    pytest.param(
        f'{SB}<file path="a.js">\n\n  \n  ```js\nx\n  ```  \n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "x\n"), ("end_sandbox",)],
        id="blank-lines-before-indented-fence-are-markup",
    ),
    pytest.param(
        f'{SB}<file path="a.js">\n``x\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "``x\n"), ("end_sandbox",)],
        id="two-backticks-are-content",
    ),
    pytest.param(
        f'{SB}<file path="a.html">&lt;div&gt; &amp;amp; &quot;</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.html", "&lt;div&gt; &amp;amp; &quot;"), ("end_sandbox",)],
        id="no-entity-decoding-in-bodies",
    ),
    pytest.param(
        f'{SB}<file path="a.jsx">\n\nreturn <div>{{a < b}}</div>;\n</file>{SB_END}',
        [("sandbox", "p"), ("file", "a.jsx", "\nreturn <div>{a < b}</div>;\n"), ("end_sandbox",)],
        id="one-leading-newline-is-markup-jsx-kept",
    ),
    pytest.param(
        f'{SB}<file path="a.js">x</FILE><File path="b.js">y</fILe>{SB_END}',
        [("sandbox", "p"), ("file", "a.js", "x"), ("file", "b.js", "y"), ("end_sandbox",)],
        id="close-tag-any-case",
    ),
    pytest.param(
        f'{SB}<file path="/etc/passwd">root</file><file path="ok.js">1</file>{SB_END}',
        [
            ("sandbox", "p"),
            ("error", "invalid_file_path"),
            ("file", "ok.js", "1"),
            ("end_sandbox",),
        ],
        id="absolute-path-refused-stream-continues",
    ),
    pytest.param(
        f'{SB}<file path="../x">a</file><file path="src/../../y">b</file>'
        f'<file path="">c</file><file>d</file><file path="a\x00b">e</file>'
        f'<file path="a\x07b">f</file><file path="C:\\x.js">g</file>{SB_END}',
        [("sandbox", "p"), *[("error", "invalid_file_path")] * 7, ("end_sandbox",)],
        id="unsafe-paths-refused",
    ),
    pytest.param(
        f'{SB}<file path="./src/../file.ts">a</file><file path="src\\\\b.js">b</file>{SB_END}',
        [("sandbox", "p"), ("file", "file.ts", "a"), ("file", "src/b.js", "b"), ("end_sandbox",)],
        id="paths-normalized",
    ),
    pytest.param(
        "<edward_install>\nframework: nextjs\npackages: react, next@^14\n- tailwindcss\n"
        "- @types/node\n</edward_install>",
        [("install", ["react", "next@^14", "tailwindcss", "@types/node"], "nextjs")],
        id="install-block",
    ),
    pytest.param(
        "<edward_install>packages: left-pad; rm -rf /, $(curl x), ../../etc</edward_install>",
        [
            ("raw", {"type": "install_start"}),
            ("error", "invalid_package"),
            ("error", "invalid_package"),
            ("error", "invalid_package"),
            ("raw", {"type": "install_content", "dependencies": ["left-pad"], "framework": None}),
            ("raw", {"type": "install_end"}),
        ],
        id="install-refuses-bad-specs",
    ),
    pytest.param(
        "<edward_install>npm install react</edward_install>",
        [
            ("raw", {"type": "install_start"}),
            ("error", "invalid_install_line"),
            ("raw", {"type": "install_content", "dependencies": [], "framework": None}),
            ("raw", {"type": "install_end"}),
        ],
        id="install-line-not-understood",
    ),
    pytest.param(
        """<edward_command command="grep" args='useEffect .'>""",
        [("error", "invalid_command_args")],
        id="command-args-not-json",
    ),
    pytest.param(
        """<edward_command command="ls" args='["a", 1]'><edward_command args='["x"]'>"""
        """<edward_command command="npm run build">""",
        [
            ("error", "invalid_command_args"),
            ("error", "missing_attribute"),
            ("error", "invalid_command"),
        ],
        id="command-malformed",
    ),
    pytest.param(
        """<edward_command command="npm" args='["run","build"]'></edward_command>"""
        """<edward_command command="ls">""",
        [("command", "npm", ["run", "build"]), ("command", "ls", [])],
        id="command-close-tag-ignored",
    ),
    pytest.param(
        '<edward_web_search query="vite hmr"><edward_web_search query="x" max_results="3">'
        '</edward_web_search><edward_web_search query="y" max_results="lots">'
        "<edward_web_search max_results='2'>",
        [
            ("search", "vite hmr"),
            ("search", "x", 3),
            ("error", "invalid_attribute"),
            ("search", "y"),
            ("error", "missing_attribute"),
        ],
        id="web-search",
    ),
    pytest.param(
        '<edward_web_search query="a" max_results="²"><edward_web_search query="b"'
        ' max_results="\u0663"><edward_web_search query="c" max_results="00000000000000000002">',
        [
            ("error", "invalid_attribute"),
            ("search", "a"),
            ("error", "invalid_attribute"),
            ("search", "b"),
            ("error", "invalid_attribute"),
            ("search", "c"),
        ],
        id="web-search-non-ascii-digits",
    ),
    pytest.param(
        '<edward_url_scrape url="https://example.com/a?b=1&amp;c=2">'
        '<edward_url_scrape url="file:///etc/passwd">',
        [("scrape", "https://example.com/a?b=1&c=2"), ("error", "invalid_attribute")],
        id="url-scrape",
    ),
    pytest.param(
        "<Thinking>unfinished",
        [
            ("raw", {"type": "thinking_start"}),
            ("raw", {"type": "thinking_content", "content": "unfinished"}),
            ("error", "unclosed_tag"),
            ("raw", {"type": "thinking_end"}),
        ],
        id="unclosed-thinking",
    ),
    pytest.param(
        f'{SB}<file path="a.js">part',
        [
            ("sandbox", "p"),
            ("raw", {"type": "file_start", "path": "a.js"}),
            ("raw", {"type": "file_content", "path": "a.js", "content": "part"}),
            ("error", "unclosed_tag"),
            ("raw", {"type": "file_end", "path": "a.js"}),
            ("error", "unclosed_tag"),
            ("end_sandbox",),
        ],
        id="unclosed-file-and-sandbox",
    ),
    pytest.param(
        "<edward_install>packages: react",
        [
            ("raw", {"type": "install_start"}),
            ("error", "unclosed_tag"),
            ("raw", {"type": "install_content", "dependencies": ["react"], "framework": None}),
            ("raw", {"type": "install_end"}),
        ],
        id="unclosed-install",
    ),
    pytest.param(
        "hello</edward_web_se",
        [("text", "hello"), ("error", "unclosed_tag")],
        id="partial-tag-at-close-reported",
    ),
    pytest.param(
        f'{SB}<file path="a.js">x</file><edward_done />',
        [
            ("sandbox", "p"),
            ("file", "a.js", "x"),
            ("error", "unclosed_tag"),
            ("end_sandbox",),
            ("done",),
        ],
        id="done-ends-open-sandbox",
    ),
    pytest.param(
        f'{SB}<file path="a.js">x{SB_END}',
        [
            ("sandbox", "p"),
            ("raw", {"type": "file_start", "path": "a.js"}),
            ("raw", {"type": "file_content", "path": "a.js", "content": "x"}),
            ("error", "unclosed_tag"),
            ("raw", {"type": "file_end", "path": "a.js"}),
            ("end_sandbox",),
        ],
        id="sandbox-close-ends-open-file",
    ),
    pytest.param(
        f"<Thinking>plan{SB}{SB_END}",
        [
            ("raw", {"type": "thinking_start"}),
            ("raw", {"type": "thinking_content", "content": "plan"}),
            ("error", "unclosed_tag"),
            ("raw", {"type": "thinking_end"}),
            ("sandbox", "p"),
            ("end_sandbox",),
        ],
        id="structural-tag-ends-open-thinking",
    ),
    pytest.param(
        f'{SB}{SB}<file path="a.js">x</file>{SB_END}',
        [("sandbox", "p"), ("error", "unexpected_tag"), ("file", "a.js", "x"), ("end_sandbox",)],
        id="nested-sandbox-refused",
    ),
    pytest.param(
        f'{SB}<file path="empty.txt"/><file path="b.txt" />{SB_END}',
        [("sandbox", "p"), ("file", "empty.txt", None), ("file", "b.txt", None), ("end_sandbox",)],
        id="self-closing-file-is-empty",
    ),
    pytest.param(
        "a</edward_install>b</edward_sandbox>c</file>d</Thinking>e",
        [("text", "a</edward_install>b</edward_sandbox>c</file>d</Thinking>e")],
        id="stray-closing-tags-are-text",
    ),
    pytest.param(
        "x</edward_future_tool>y<edward_future a='1'>z",
        [("text", "x</edward_future_tool>y<edward_future a='1'>z")],
        id="unknown-tags-are-text",
    ),
    pytest.param(
        f"""{SB}<file path="a.js">1</file><edward_command command="ls" args='["-la"]'>"""
        f"""<edward_install>packages: zod</edward_install>{SB_END}""",
        [
            ("sandbox", "p"),
            ("file", "a.js", "1"),
            ("command", "ls", ["-la"]),
            ("install", ["zod"]),
            ("end_sandbox",),
        ],
        id="actions-between-files-honoured",
    ),
    pytest.param(
        "<edward_command command='ls' " + "x" * 5000 + ">",
        [("text", "<edward_command command='ls' " + "x" * 5000 + ">")],
        id="overlong-tag-is-text",
    ),
    pytest.param(
        f'{SB}<edward_command command="npm"TEXT <file path="src/Kept.jsx">a</file>{SB_END}',
        [
            ("sandbox", "p"),
            ("error", "malformed_tag"),
            ("text", '<edward_command command="npm"TEXT '),
            ("file", "src/Kept.jsx", "a"),
            ("end_sandbox",),
        ],
        id="malformed-text-after-value-kept-next-tag-parsed",
    ),
    pytest.param(
        f'{SB}<edward_command command="npm" args=\'["i"]\'\n<file path="a.js">a</file>{SB_END}',
        [
            ("sandbox", "p"),
            ("error", "malformed_tag"),
            ("text", '<edward_command command="npm" args=\'["i"]\'\n'),
            ("file", "a.js", "a"),
            ("end_sandbox",),
        ],
        id="malformed-lt-inside-tag-kept",
    ),
    pytest.param(
        f'{SB}<file path="a.js>' + "x" * 5000 + f"</file>{SB_END}",
        [
            ("sandbox", "p"),
            ("error", "malformed_tag"),
            ("text", '<file path="a.js>' + "x" * 5000 + "</file>"),
            ("end_sandbox",),
        ],
        id="malformed-quote-open-at-limit-kept",
    ),
    pytest.param(
        f'{SB}<file path="a.js>x</file>\n<file path="b.js">y</file>{SB_END}',
        [
            ("sandbox", "p"),
            ("error", "malformed_tag"),
            ("text", '<file path="a.js>x</file>\n'),
            ("file", "b.js", "y"),
            ("end_sandbox",),
        ],
        id="malformed-quote-closed-by-next-tag-kept",
    ),
    pytest.param(
        f'{SB}<file path="a.jsx">a </file\nb <div/></file>{SB_END}',
        [
            ("sandbox", "p"),
            ("raw", {"type": "file_start", "path": "a.jsx"}),
            ("raw", {"type": "file_content", "path": "a.jsx", "content": "a "}),
            ("error", "malformed_tag"),
            ("raw", {"type": "file_content", "path": "a.jsx", "content": "</file\nb <div/>"}),
            ("raw", {"type": "file_end", "path": "a.jsx"}),
            ("end_sandbox",),
        ],
        id="malformed-closing-tag-in-file-body-kept",
    ),
    pytest.param(
        "<Thinking>use <edward_done now <b>x</b></Thinking>",
        [
            ("raw", {"type": "thinking_start"}),
            ("raw", {"type": "thinking_content", "content": "use "}),
            ("error", "malformed_tag"),
            ("raw", {"type": "thinking_content", "content": "<edward_done now <b>x</b>"}),
            ("raw", {"type": "thinking_end"}),
        ],
        id="malformed-tag-in-thinking-kept",
    ),
    pytest.param(
        "<edward_done a=\"x\"/><edward_done a='y'\n>",
        [("done",), ("done",)],
        id="quoted-value-then-slash-or-space-is-well-formed",
    ),
    pytest.param(
        f'{SB}<file path="{"a" * 255}/{"é" * 126}.js">1</file>'
        f'<file path="{"a" * 256}.js">2</file><file path="d/{"é" * 128}">3</file>'
        f'<file path="{"/".join(["é" * 100] * 21)}">4</file>{SB_END}',  # 4220 bytes
        [
            ("sandbox", "p"),
            ("file", f"{'a' * 255}/{'é' * 126}.js", "1"),
            *[("error", "invalid_file_path")] * 3,
            ("end_sandbox",),
        ],
        id="path-component-and-length-limits",
    ),
    pytest.param(
        "<file path='a.js'>not in a sandbox</file>",
        [("text", "<file path='a.js'>not in a sandbox</file>")],
        id="file-outside-sandbox-is-text",
    ),
    pytest.param(
        f"{SB}\nI will write files.\n{SB_END}",
        [("sandbox", "p"), ("text", "\nI will write files.\n"), ("end_sandbox",)],
        id="prose-inside-sandbox-kept",
    ),
    pytest.param(
        f'{SB}<edward_edit path="src/App.jsx">\n<<<<<<< SEARCH\n  <h1>Counter</h1>\n=======\n'
        f"  <h1>Clicker</h1>\n>>>>>>> REPLACE\n</edward_edit>{SB_END}",
        [
            ("sandbox", "p"),
            ("edit", "src/App.jsx", ("  <h1>Counter</h1>\n", "  <h1>Clicker</h1>\n")),
            ("end_sandbox",),
        ],
        id="edit-one-block",
    ),
    pytest.param(
        f"{SB}<edward_edit path='./a.js'>\n```js\n<<<<<<< SEARCH\na\nb\n=======\n>>>>>>> REPLACE\n"
        "\n<<<<<< SEARCH\nc\r\n=======\r\nd</x>\r\n>>>>>>> REPLACE\n```\n</edward_edit>",
        [
            ("sandbox", "p"),
            ("edit", "a.js", ("a\nb\n", ""), ("c\r\n", "d</x>\r\n")),
            ("error", "unclosed_tag"),
            ("end_sandbox",),
        ],
        id="edit-blocks-fenced-deletion-crlf",
    ),
    pytest.param(
        f'{SB}<edward_edit path="a.js">\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\nnote\n'
        "<<<<<<< SEARCH\ny\n=======\nz\n<<<<<<< SEARCH\np\n=======\nq\n>>>>>>> REPLACE"
        "</edward_edit>",
        [
            ("sandbox", "p"),
            (
                "edit",
                "a.js",
                "malformed_edit_block",
                "malformed_edit_block",
                "malformed_edit_block",
                ("p\n", "q\n"),
            ),
            ("error", "unclosed_tag"),
            ("end_sandbox",),
        ],
        id="edit-malformed-blocks-reported",
    ),
    pytest.param(
        f'{SB}<edward_edit path="a.js">\n<<<<<<< SEARCH\nx\n=======\ny',
        [
            ("sandbox", "p"),
            ("edit", "a.js", "unclosed_tag", "malformed_edit_block"),
            ("error", "unclosed_tag"),
            ("end_sandbox",),
        ],
        id="edit-cut-inside-block",
    ),
    pytest.param(
        f'{SB}<edward_edit path="../x.js">\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n'
        f'</edward_edit><edward_edit path="b.js" />{SB_END}',
        [
            ("sandbox", "p"),
            ("error", "invalid_file_path"),
            ("edit", "b.js"),
            ("end_sandbox",),
        ],
        id="edit-unsafe-path-skipped-and-self-closing",
    ),
    pytest.param(
        f'{SB}<edward_edit path=".kiln/version">\n<<<<<<< SEARCH\nabc\n=======\ndef\n'
        f'>>>>>>> REPLACE\n</edward_edit><edward_edit path="src/node_modules/x/i.js">\n'
        f"<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n</edward_edit>"
        f'<file path="node_modules/react/index.js">evil</file><file path="./.kiln">x</file>'
        f'<file path="node_modules.js">1</file><edward_read path="node_modules/react/index.js"/>'
        f"{SB_END}",
        [
            ("sandbox", "p"),
            *[("error", "protected_path")] * 4,
            ("file", "node_modules.js", "1"),
            ("read", "node_modules/react/index.js"),  # reading is fine
            ("end_sandbox",),
        ],
        id="protected-folders-not-written",
    ),
    pytest.param(
        "Let me look.<edward_read path=\"src/App.jsx\"/><edward_read path='/etc/x' />"
        f'{SB}<edward_read path="a/./b.css"></edward_read>{SB_END}',
        [
            ("text", "Let me look."),
            ("read", "src/App.jsx"),
            ("error", "invalid_file_path"),
            ("sandbox", "p"),
            ("read", "a/b.css"),
            ("end_sandbox",),
        ],
        id="read-tags",
    ),
    pytest.param(
        f'{SB}<edward_edit path="a.js">\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n'
        f'<edward_edit path="b.js">\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n'
        f'<file path="c.js">e</file>{SB_END}',
        [
            ("sandbox", "p"),
            ("edit", "a.js", ("a\n", "b\n"), "unclosed_tag"),
            ("edit", "b.js", ("c\n", "d\n"), "unclosed_tag"),
            ("file", "c.js", "e"),
            ("end_sandbox",),
        ],
        id="edit-ended-by-the-next-edit-or-file",
    ),
    pytest.param(
        '<edward_edit path="a.js">x</edward_edit>',
        [("text", '<edward_edit path="a.js">x</edward_edit>')],
        id="edit-outside-sandbox-is-text",
    ),
]

BOLT_CASES = [
    pytest.param(
        'Sure.\n<boltArtifact id="todo" title="Todo">\n'
        '<boltAction type="file" filePath="src/a.js">\nconst a = 1;\n</boltAction>\n'
        '<boltAction type="shell">npm install zustand react-dom@18 && npm run build</boltAction>\n'
        "</boltArtifact>\nDone.",
        [
            ("text", "Sure.\n"),
            ("sandbox", "todo"),
            ("text", "\n"),
            ("file", "src/a.js", "const a = 1;\n"),
            ("text", "\n"),
            ("install", ["zustand", "react-dom@18"]),
            ("command", "npm", ["run", "build"]),
            ("text", "\n"),
            ("end_sandbox",),
            ("text", "\nDone."),
        ],
        id="bolt-artifact",
    ),
    pytest.param(
        '<boltArtifact title="T"><boltAction type="shell">curl x | sh</boltAction>'
        '<boltAction type="magic">x</boltAction></boltArtifact>',
        [
            ("sandbox", "T"),
            ("error", "unsupported_shell"),
            ("error", "invalid_attribute"),
            ("end_sandbox",),
        ],
        id="bolt-refusals",
    ),
    pytest.param(
        '<boltArtifact id="a"><boltAction type="file" filePath="../x">y</boltAction>'
        "</boltArtifact>",
        [("sandbox", "a"), ("error", "invalid_file_path"), ("end_sandbox",)],
        id="bolt-unsafe-path",
    ),
    pytest.param(
        '<boltArtifact id="a"><boltAction type="file" filePath="/home/project/src/a.js">1'
        '</boltAction><boltAction type="file" filePath="/src/b.js">2</boltAction>'
        "</boltArtifact>",
        [("sandbox", "a"), ("file", "src/a.js", "1"), ("file", "src/b.js", "2"), ("end_sandbox",)],
        id="bolt-project-root-paths",
    ),
]
