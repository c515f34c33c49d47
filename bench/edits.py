"""Edit benchmark: a one-line change to a 400-line file as an edit block vs a whole-file rewrite,
and context selection for a 300-file project; prints numbers (never a test).

- **output tokens** of the two answers (the real tokenizers kiln counts with: o200k, cl100k),
  and the generation time they imply at ``--tokens-per-second`` (the model's output rate: the
  part of a turn's time that the answer's length decides);
- **kiln's own time** per answer, best of ``--repeat``: parsing the answer, plus, for the edit,
  applying its block to the file (``sandbox.writes.edit_blocks``);
- **context selection** for a generated 300-file project with a 20k-token budget
  (``app.agent.context.select_context``, real token counts), best of ``--repeat``.

    python bench/edits.py
    python bench/edits.py --tokens-per-second 80 --repeat 20
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.agent.context import select_context
from app.tokens import TokenCounter
from parser import StreamParser
from parser.events import EditBlock, Event
from sandbox import get_template
from sandbox.writes.edit_blocks import apply_edit_blocks

PATH = "src/components/Dashboard.jsx"
WRAP = (
    '<Response>\nDone.\n<edward_sandbox project="p" base="vite-react">\n{body}'
    "</edward_sandbox>\n</Response>\n<edward_done />\n"
)


def big_file(lines: int = 400) -> str:
    """A component of ``lines`` lines (a table of rows, as generated apps have)."""
    head = ['import { useState } from "react";', "", "export default function Dashboard() {"]
    head += ["  const [open, setOpen] = useState(false);", "  return (", "    <table>"]
    rows = [f"      <tr><td>Row {n}</td><td>{n * 7}</td></tr>" for n in range(lines - 9)]
    tail = ["    </table>", "  );", "}"]
    return "\n".join(head + rows + tail) + "\n"


def answers(content: str) -> tuple[str, str, str]:
    """The changed file, the edit-block answer and the whole-file answer."""
    old, new = (
        "      <tr><td>Row 200</td><td>1400</td></tr>\n",
        "      <tr><td>Row 200</td><td>1401</td></tr>\n",
    )
    changed = content.replace(old, new)
    block = (
        f'<edward_edit path="{PATH}">\n<<<<<<< SEARCH\n{old}=======\n{new}'
        ">>>>>>> REPLACE\n</edward_edit>\n"
    )
    whole = f'<file path="{PATH}">\n{changed}</file>\n'
    return changed, WRAP.format(body=block), WRAP.format(body=whole)


def parse(text: str) -> list[Event]:
    parser = StreamParser()
    return [*parser.feed(text), *parser.close()]


def best(repeat: int, work: Callable[[], object]) -> float:
    """The best wall time of ``repeat`` runs of ``work``, in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def apply_edit(text: str, content: str) -> str | None:
    blocks = [(e.search, e.replace) for e in parse(text) if isinstance(e, EditBlock)]
    return apply_edit_blocks(PATH, content, blocks).content


def project(size: int = 300) -> dict[str, str]:
    """A generated project: entrypoints, an App importing 20 components, utils, components."""
    files = {
        "index.html": '<div id="root"></div><script type="module" src="/src/main.jsx"></script>\n',
        "src/main.jsx": 'import App from "./App.jsx";\nexport const root = App;\n',
        "src/App.jsx": "".join(f'import C{i} from "./components/C{i}.jsx";\n' for i in range(20)),
    }
    files |= {f"src/utils/u{i}.js": f"export const u = (x) => x + {i};\n" for i in range(10)}
    n = 0
    while len(files) < size:
        rows = "\n".join(f"      <li>{{u({r})}}</li>" for r in range(50))
        files[f"src/components/C{n}.jsx"] = (
            f'import {{ u }} from "../utils/u{n % 10}.js";\n'
            f"export default function C{n}() {{\n  return (\n    <ul>\n{rows}\n"
            "    </ul>\n  );\n}\n"
        )
        n += 1
    return files


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--tokens-per-second", type=float, default=60.0)
    args.add_argument("--repeat", type=int, default=10)
    options = args.parse_args()
    content = big_file()
    changed, edit, whole = answers(content)
    assert apply_edit(edit, content) == changed
    print(f"file: {content.count(chr(10))} lines, {len(content)} bytes; one line changed")
    for encoding, (provider, model) in {
        "o200k": ("openai", "gpt-4o"),
        "cl100k": ("openai", "gpt-4"),
    }.items():
        count = TokenCounter.for_model(provider, model).count
        e, w = count(edit), count(whole)
        rate = options.tokens_per_second
        print(
            f"output tokens ({encoding}): edit block {e}, whole file {w} ({w / e:.0f}x);"
            f" at {rate:g} tok/s: {e / rate:.1f} s vs {w / rate:.1f} s"
        )
    edit_ms = best(options.repeat, lambda: apply_edit(edit, content))
    whole_ms = best(options.repeat, lambda: parse(whole))
    print(f"kiln time: edit block parse+apply {edit_ms:.2f} ms, whole file parse {whole_ms:.2f} ms")
    files = project()
    count = TokenCounter.for_model("openai", "gpt-4o").count
    entrypoints = get_template("vite-react").entrypoints

    def select() -> object:
        return select_context(
            files,
            "make C142 bold",
            template="vite-react",
            entrypoints=entrypoints,
            budget_tokens=20_000,
            count_tokens=count,
        )

    selection = select_context(
        files,
        "make C142 bold",
        template="vite-react",
        entrypoints=entrypoints,
        budget_tokens=20_000,
        count_tokens=count,
    )
    ms = best(options.repeat, select)
    print(
        f"context selection: {len(files)} files, 20k budget: {ms:.1f} ms;"
        f" {len(selection.included)} files included, map {selection.map_tokens} tokens,"
        f" {len(selection.left_out)} left out"
    )


if __name__ == "__main__":
    main()
