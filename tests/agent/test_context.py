"""Context selection for edit turns: ranking, the budget, and what is left out."""

from __future__ import annotations

import pytest

from app.agent.context import (
    DID_NOT_FIT,
    ENTRYPOINT,
    IMPORTED,
    NAMED,
    RECENT,
    SELECTED,
    UNRELATED,
    existing_project,
    guess_template,
    select_context,
)
from app.tokens import TokenCounter
from sandbox import get_template

COUNT = TokenCounter.for_model("openai", "gpt-4o").count


def component(index: int) -> str:
    """A component of about 60 lines importing one shared util."""
    rows = "\n".join(f"      <li key={{{row}}}>{{format(items[{row}])}}</li>" for row in range(50))
    return (
        f'import {{ format }} from "../utils/format{index % 10}.js";\n\n'
        f"export default function Comp{index}({{ items }}) {{\n"
        f'  return (\n    <ul className="comp{index}">\n{rows}\n    </ul>\n  );\n}}\n'
    )


def generated_project(size: int = 300) -> dict[str, str]:
    """``size`` files: the vite-react entrypoints, an App importing 20 pages, components, utils."""
    files = {
        "index.html": '<div id="root"></div><script type="module" src="/src/main.jsx"></script>\n',
        "src/main.jsx": 'import App from "./App.jsx";\nexport const root = App;\n',
        "src/App.jsx": "".join(
            f'import Comp{i} from "./components/Comp{i}.jsx";\n' for i in range(20)
        )
        + "export default function App() { return null; }\n",
    }
    files |= {
        f"src/utils/format{i}.js": f"export const format = (x) => `{i}:${{x}}`;\n"
        for i in range(10)
    }
    index = 0
    while len(files) < size:
        files[f"src/components/Comp{index}.jsx"] = component(index)
        index += 1
    return files


def test_300_files_in_20k_tokens_keep_the_named_file_its_imports_and_the_entrypoint() -> None:
    files = generated_project()
    assert len(files) == 300
    selection = select_context(
        files,
        "make the list of Comp142 bold",
        template="vite-react",
        entrypoints=get_template("vite-react").entrypoints,
        recent=["src/components/Comp250.jsx"],
        budget_tokens=20_000,
        count_tokens=COUNT,
    )
    included = {item.path: item.reason for item in selection.included}
    assert included["src/components/Comp142.jsx"] == NAMED
    assert included["src/utils/format2.js"] == IMPORTED
    assert included["src/main.jsx"] == ENTRYPOINT
    assert included["src/components/Comp250.jsx"] == RECENT
    total = selection.map_tokens + sum(item.tokens or 0 for item in selection.included)
    assert total <= 20_000
    assert selection.map_tokens == COUNT(selection.file_map)
    left = {item.path: item.reason for item in selection.left_out}
    assert set(left) | set(included) == set(files)
    assert DID_NOT_FIT in left.values()
    assert UNRELATED in left.values()
    assert all(f"- {path} (" in selection.file_map for path in files)
    shown = [path for path, content in selection.contents.items() if content is not None]
    assert all(selection.contents[path] == files[path] for path in shown)  # never cut
    event = selection.to_event()
    assert event["type"] == "context"
    assert {"path": "src/components/Comp142.jsx", "reason": NAMED} in [
        {k: v for k, v in item.items() if k != "tokens"} for item in event["included"]
    ]


def test_a_selected_file_comes_first_even_when_the_request_names_nothing() -> None:
    files = generated_project()
    selection = select_context(
        files,
        "make this bigger",
        template="vite-react",
        entrypoints=get_template("vite-react").entrypoints,
        selected=["src/components/Comp77.jsx", "src/gone.jsx"],
        budget_tokens=20_000,
        count_tokens=COUNT,
    )
    first = selection.included[0]
    assert (first.path, first.reason) == ("src/components/Comp77.jsx", SELECTED)
    assert next(iter(selection.contents)) == "src/components/Comp77.jsx"
    assert "src/gone.jsx" not in selection.contents  # a file the project no longer holds


def test_the_map_lists_imports_and_exports() -> None:
    files = generated_project(40)
    selection = select_context(
        files, "x", template="vite-react", entrypoints=(), budget_tokens=50_000, count_tokens=COUNT
    )
    lines = selection.file_map.splitlines()
    line = next(line for line in lines if line.startswith("- src/components/Comp3.jsx ("))
    assert "imports src/utils/format3.js" in line
    assert "exports Comp3" in line


def test_a_file_too_large_for_the_budget_is_left_out_whole() -> None:
    files = {"src/App.jsx": "const a = 1;\n" * 3000, "src/small.js": "export const s = 1;\n"}
    selection = select_context(
        files,
        "fix App.jsx and small.js",
        template="vite-react",
        entrypoints=(),
        budget_tokens=500,
        count_tokens=COUNT,
    )
    assert selection.contents["src/App.jsx"] is None
    assert selection.contents["src/small.js"] == files["src/small.js"]
    assert [(f.path, f.reason) for f in selection.left_out] == [("src/App.jsx", DID_NOT_FIT)]


def test_a_project_that_is_only_its_template_is_not_an_edit() -> None:
    template = {"index.html": "<html></html>\n", "src/main.jsx": "main\n"}
    assert (
        existing_project({p: c.encode() for p, c in template.items()}, "vite-react", template)
        is None
    )
    changed = {**template, "src/App.jsx": "app\n"}
    stored = {p: c.encode() for p, c in changed.items()} | {"logo.png": b"\x89PNG\xff"}
    project = existing_project(stored, "vite-react", template, ["src/App.jsx"])
    assert project is not None
    assert project.files == changed
    assert project.recent == ("src/App.jsx",)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param({"package.json": b'{"dependencies": {"next": "14"}}'}, "nextjs", id="next"),
        pytest.param(
            {"package.json": b'{"devDependencies": {"vite": "5"}}'}, "vite-react", id="vite"
        ),
        pytest.param({"package.json": b"{}", "index.html": b""}, "vanilla", id="vanilla"),
        pytest.param({"README.md": b""}, "vite-react", id="unknown-keeps-default"),
    ],
)
def test_the_template_of_a_project_without_sandbox_is_guessed(
    files: dict[str, bytes], expected: str
) -> None:
    assert guess_template(files, "vite-react") == expected
