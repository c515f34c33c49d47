"""Parser benchmark: prints throughput and ratios measured in one run (never a test).

Both implementations are measured, each in a process of its own (one process can load only one
``parser``): the pure-Python parser and the compiled one (mypyc, ``make parser-compiled``; see
``app/parser_choice.py``). Each is timed against the same one-shot scan in its own process, runs
interleaved, so the two ratios printed at the end are comparable on a loaded machine. A generated
~1 MB answer of 200 JSX-heavy files is fed in random 1-32-character chunks. The floor for any
parser written in Python is one ``re.finditer`` scan for tags over the complete text; the report
gives kiln's time as a multiple of it, next to a loop that does nothing but wrap each chunk in one
frozen dataclass (and one slotted class), to show what per-chunk work alone costs. Then a 100 MB
single file is streamed to show that memory does not grow with it.

    python bench/parser.py [--files 200] [--seed 1] [--repeat 15] [--only python|compiled]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.parser_choice import activate_or_exit, fresh_build

TAG_SCAN = re.compile(r"</?[A-Za-z][^>]*>")

COMPONENT = """import {{ useState }} from "react";
import Card{i} from "./Card{i}.jsx";

export default function Widget{i}({{ items }}) {{
  const [open, setOpen] = useState(false);
  const shown = items.filter((item) => item.size < {i} && item.size > 0);
  return (
    <section className="widget-{i}">
      <h2 onClick={{() => setOpen(!open)}}>Widget {i} &amp; friends</h2>
      {{open && (
        <ul>
          {{shown.map((item) => (
            <li key={{item.id}}>
              <Card{i} title={{item.title}} note="a < b" />
            </li>
          ))}}
        </ul>
      )}}
    </section>
  );
}}
"""


WIDGETS_PER_FILE = 8  # about 5 KB per file, 1 MB for 200 files


def generate_answer(files: int) -> str:
    """A realistic tagged answer: thinking, prose, an install block and ``files`` JSX files."""
    parts = [
        "<Thinking>\nPlan the widgets; compare a < b where needed.\n</Thinking>\n<Response>\n",
        "Here are the widgets.\n<edward_install>\nframework: vite-react\npackages: zustand\n",
        '</edward_install>\n<edward_sandbox project="bench" base="vite-react">\n',
    ]
    for i in range(files):
        body = "".join(COMPONENT.format(i=i * 10 + k) for k in range(WIDGETS_PER_FILE))
        parts.append(f'<file path="src/widgets/Widget{i}.jsx">\n{body}</file>\n')
    parts.append('</edward_sandbox>\n<edward_command command="npm" args=\'["run","build"]\'>\n')
    parts.append("All done.\n</Response>\n<edward_done />\n")
    return "".join(parts)


def random_chunks(text: str, seed: int) -> list[str]:
    """``text`` split into random 1-32-character chunks."""
    rng = random.Random(seed)
    chunks, at = [], 0
    while at < len(text):
        size = rng.randint(1, 32)
        chunks.append(text[at : at + size])
        at += size
    return chunks


def best_of(repeat: int, contenders: dict[str, Callable[[], object]]) -> dict[str, float]:
    """The fastest of ``repeat`` runs of each contender, in seconds.

    Runs are interleaved (one of each per round), so load from other processes on a shared
    machine weighs on every contender alike and the ratios stay meaningful.
    """
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(repeat):
        for name, fn in contenders.items():
            started = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def run_kiln(chunks: list[str]) -> int:
    from parser import StreamParser  # after activate_or_exit() chose the implementation

    parser = StreamParser()
    count = 0
    for chunk in chunks:
        count += len(parser.feed(chunk))
    return count + len(parser.close())


def run_regex(text: str) -> int:
    return sum(1 for _ in TAG_SCAN.finditer(text))


@dataclass(frozen=True)
class FrozenChunk:
    content: str


class SlottedChunk:
    __slots__ = ("content",)

    def __init__(self, content: str) -> None:
        self.content = content


def run_wrap(chunks: list[str], cls: type) -> int:
    return len([cls(chunk) for chunk in chunks])


def peak_memory_for_file(megabytes: int) -> tuple[float, float]:
    """Peak traced memory (MiB) while streaming one file of ``megabytes``, and the chunk size."""
    block = COMPONENT.format(i=1) * 40
    rounds = megabytes * 1024 * 1024 // len(block) + 1
    from parser import StreamParser  # after activate_or_exit() chose the implementation

    parser = StreamParser()
    parser.feed('<edward_sandbox project="big"><file path="big.jsx">\n')
    tracemalloc.start()
    for _ in range(rounds):
        parser.feed(block)
    parser.feed("</file></edward_sandbox>")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, len(block) / 2**20


TARGETS = {"python": 12.0, "compiled": 7.0}  # issue 13: times the one-shot scan, at most


def options() -> argparse.Namespace:
    """The command line."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--files", type=int, default=200)
    args.add_argument("--seed", type=int, default=1)
    args.add_argument("--repeat", type=int, default=15)
    args.add_argument("--big-mb", type=int, default=100)
    args.add_argument("--only", choices=sorted(TARGETS), help="measure one, in this process")
    return args.parse_args()


def main() -> None:
    """Measure each implementation in a child process, then print both ratios."""
    opts = options()
    if opts.only:
        measure(opts, opts.only)
        return
    ratios: dict[str, float | str] = {}
    for implementation in ("python", "compiled"):
        if implementation == "compiled" and fresh_build() is None:
            ratios[implementation] = "not measured: no fresh build (make parser-compiled)"
            continue
        print(f"== {implementation} parser", flush=True)
        ratios[implementation] = run_child(implementation)
    print("== both")
    for implementation, ratio in ratios.items():
        if isinstance(ratio, str):
            print(f"RATIO {implementation} / one-shot scan: {ratio}")
            continue
        target = TARGETS[implementation]
        verdict = "within" if ratio <= target else "OVER"
        print(
            f"RATIO {implementation} / one-shot scan: {ratio:.1f}x "
            f"({verdict} the {target:g}x target)"
        )


def run_child(implementation: str) -> float:
    """Run this script with ``--only implementation`` (its report goes to our stdout)."""
    argv = [sys.executable, __file__, "--only", implementation, *sys.argv[1:]]
    env = {**os.environ, "KILN_PARSER": implementation}
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, text=True, check=True)
    lines = done.stdout.splitlines()
    print("\n".join(line for line in lines if not line.startswith("RESULT ")), flush=True)
    result = json.loads(next(line for line in lines if line.startswith("RESULT "))[7:])
    return float(result["ratio"])


def measure(opts: argparse.Namespace, implementation: str) -> None:
    """Measure and print one implementation (``KILN_PARSER`` is set by the parent)."""
    choice = activate_or_exit("bench/parser.py", {**os.environ, "KILN_PARSER": implementation})
    print(f"parser: {choice.implementation} ({choice.reason})")
    text = generate_answer(opts.files)
    chunks = random_chunks(text, opts.seed)
    megabytes = len(text.encode()) / 1e6
    events = run_kiln(chunks)
    best = best_of(
        opts.repeat,
        {
            "kiln": lambda: run_kiln(chunks),
            "regex": lambda: run_regex(text),
            "frozen": lambda: run_wrap(chunks, FrozenChunk),
            "slotted": lambda: run_wrap(chunks, SlottedChunk),
        },
    )
    kiln, regex, frozen, slotted = best["kiln"], best["regex"], best["frozen"], best["slotted"]
    sizes = [len(c) for c in chunks]

    print(
        f"input: {megabytes:.2f} MB, {opts.files} files, {len(chunks)} chunks "
        f"(1-32 chars, mean {statistics.mean(sizes):.1f})"
    )
    print(
        f"kiln parser: {kiln * 1e3:.1f} ms  {megabytes / kiln:.1f} MB/s  "
        f"{kiln / len(chunks) * 1e6:.2f} us/chunk  {events / megabytes:.0f} events/MB"
    )
    print(f"one-shot re.finditer tag scan: {regex * 1e3:.1f} ms")
    print(
        f"wrap each chunk in a frozen dataclass: {frozen * 1e3:.1f} ms "
        f"({frozen / regex:.1f}x the scan); slotted class: {slotted * 1e3:.1f} ms "
        f"({slotted / regex:.1f}x)"
    )
    print(f"ratio kiln ({implementation}) / one-shot scan: {kiln / regex:.1f}x")

    peak, chunk_mb = peak_memory_for_file(opts.big_mb)
    print(
        f"{opts.big_mb} MB single file in {chunk_mb:.2f} MiB chunks: peak traced memory "
        f"{peak:.2f} MiB (≈ {peak / chunk_mb:.1f} chunks; does not grow with the file)"
    )
    print("RESULT " + json.dumps({"ratio": kiln / regex}))


if __name__ == "__main__":
    main()
