"""The guard against whole-file rewrites that lose code."""

from __future__ import annotations

import pytest

from app.agent.rewrite_guard import refused_rewrite

LONG = "".join(f"export const value{n} = {n};\n" for n in range(40))


@pytest.mark.parametrize(
    ("path", "old", "new", "words"),
    [
        pytest.param(
            "src/App.jsx",
            "export default function App() {\n  return <h1>Hi</h1>;\n}\n",
            "export default function App() {\n  // ... rest of the code unchanged\n}\n",
            "placeholder where code was",
            id="rest-of-the-code",
        ),
        pytest.param(
            "src/a.css",
            "a { color: red; }\n",
            "/* existing styles remain the same */\nb { color: blue; }\n",
            "placeholder",
            id="css-comment",
        ),
        pytest.param("src/values.js", LONG, LONG[:200], "lines where the file had 40", id="shrink"),
    ],
)
def test_a_rewrite_that_loses_code_is_refused(path: str, old: str, new: str, words: str) -> None:
    reason = refused_rewrite(path, old, new)
    assert reason is not None
    assert words in reason
    assert repr(path) in reason


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        pytest.param("src/values.js", LONG, LONG.replace("= 3;", "= 4;"), id="one-line-change"),
        pytest.param("README.md", "# A\n" * 40, "# B\n", id="prose-may-shrink"),
        pytest.param("src/small.js", "a;\n" * 10, "b;\n", id="small-file-may-shrink"),
        pytest.param(
            "src/App.jsx",
            "// ... rest of the code unchanged\nconst a = 1;\n",
            "// ... rest of the code unchanged\nconst a = 2;\n",
            id="placeholder-already-there",
        ),
        pytest.param(
            "src/App.jsx",
            "const a = 1;\n",
            '// TODO: add dark mode\nconst a = 1;\nconst p = "rest of the code";\n',
            id="ordinary-note-and-string",
        ),
    ],
)
def test_a_faithful_rewrite_passes(path: str, old: str, new: str) -> None:
    assert refused_rewrite(path, old, new) is None
