"""A seeded generator of hostile streams for the parser (the adversarial corpus).

Each stream strings together pieces from every kind of trouble a model (or an attacker writing
through one) can produce: tag fragments and malformed tags, open quotes, NUL, control characters
and lone surrogates, very long names and attributes, deep nesting, and path tricks. Between the
pieces sit markers (``{m}``) for the lossless accounting of :mod:`tests.parser.accounting`.

Pieces are built so that no marker can become part of a well-formed tag (no bare ``>`` or
quote outside a complete tag or a malformed tag's start), and a file whose path must be refused
comes whole, with a marker-free body: the parser skips a refused file's content by design (and
says so in an error), so a marker there would be lost on purpose.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.parser.accounting import number_markers

Stream = tuple[str, list[str]]
Maker = Callable[[random.Random], str]

TAG_FRAGMENTS = [
    "<Thinking>",
    "</Thinking>",
    "<Response>",
    "</Response>",
    '<edward_sandbox project="p" base="vite-react">',
    "</edward_sandbox>",
    '<file path="src/a.jsx">',
    "<FILE PATH='src/b.ts'>",
    "</file>",
    "</File >",
    "<![CDATA[",
    "]]>",
    "]]",
    "```tsx\n",
    "~~~~\n",
    "\n```\n",
    "\n",
    "<",
    "</",
    "<div className={x}>",
    "a < b && c > d",
    "<edward_install>\n",
    "packages: react, left-pad@^1\n",
    "</edward_install>",
    """<edward_command command="npm" args='["run","build"]'>""",
    "<edward_done />",
    '<edward_web_search query="vite">',
    '<edward_url_scrape url="https://example.com">',
    "<edward_fut",
    "</edward_sandbox",
    '<edward_edit path="src/e.jsx">',
    "</edward_edit>",
    "<<<<<<< SEARCH\n",
    "=======\n",
    '<edward_read path="src/r.jsx" />',
]
# A whole edit block: its REPLACE line's bare ">" comes right after a complete tag and lines
# no tag can start in, so no marker around it can become part of a tag.
EDIT_BLOCK = '<edward_edit path="src/e.jsx">\n<<<<<<< SEARCH\n{m}\n=======\n{m}\n>>>>>>> REPLACE\n'
MALFORMED_STARTS = [
    '<edward_command command="npm"',
    '<edward_command command="npm" ',
    "<edward_command command='npm",
    '<file path="x.js',
    "<file path='y.js",
    '<edward_sandbox project="p"',
    '<edward_web_search query="q',
    "</file ",
    "<edward_done ",
    "<Thinking ",
    "<edward_command =",
]
CONTROL = ["\x00", "\x07", "\x1b[31m", "\r", "\r\n", "\ud800", "\udfff", "\ufeff", "\u202e", "é"]
SAFE_PATHS = ["a/./b.js", "src\\\\Win.jsx", "./x/../y.css", "deep/" * 40 + "z.js", "ü/名前.ts"]
UNSAFE_PATHS = [
    "../x",
    "a/../../b",
    "/etc/passwd",
    "/abs/path.js",
    "C:\\\\evil.js",
    "\\\\\\\\server\\\\share.js",
    "a\x00b.js",
    "a\x07b",
    "\ud800.js",
    "",
    "   ",
    "src/",
    ".",
    "a/" + "c" * 300 + "/b.js",
    "é" * 128,
    "/".join(["é" * 100] * 21),
]


def _long_name(rng: random.Random) -> str:
    return "<edward_" + "x" * rng.randint(100, 6000) + rng.choice(["", ">", " a='1'>"])


def _long_attribute(rng: random.Random) -> str:
    value = "v" * rng.randint(1000, 6000)
    return rng.choice(
        [
            f'<edward_sandbox project="{value}">',
            f"<file {value}='1'>skipped</file>",
            f'<edward_done x="{value}',
        ]
    )


def _nesting(rng: random.Random) -> str:
    depth = rng.randint(10, 200)
    opener, closer = rng.choice(
        [
            ("<Thinking>", "</Thinking>"),
            ('<edward_sandbox project="n">', "</edward_sandbox>"),
            ('<file path="n.js">', "</file>"),
            ("<edward_install>", "</edward_install>"),
            ("<![CDATA[", "]]>"),
        ]
    )
    return opener * depth + "{m}" + closer * rng.randint(0, depth)


def _safe_file(rng: random.Random) -> str:
    return f'<file path="{rng.choice(SAFE_PATHS)}">'


def _unsafe_file(rng: random.Random) -> str:
    body = rng.choice(["", "skipped", "```js\nskipped\n```\n", "<![CDATA[skipped]]>"])
    return f'<file path="{rng.choice(UNSAFE_PATHS)}">{body}</file>'


MAKERS: list[Maker] = [
    lambda rng: rng.choice(TAG_FRAGMENTS),
    lambda rng: rng.choice(TAG_FRAGMENTS),
    lambda rng: rng.choice(MALFORMED_STARTS),
    lambda rng: rng.choice(CONTROL) * rng.randint(1, 3),
    _long_name,
    _long_attribute,
    _nesting,
    _safe_file,
    _unsafe_file,
    lambda rng: EDIT_BLOCK,
    lambda rng: "{m}",
    lambda rng: "{m}",
    lambda rng: "{m}",
]


def hostile_stream(rng: random.Random) -> Stream:
    """One hostile stream and the markers it holds."""
    pieces = ['<edward_sandbox project="h">'] if rng.random() < 0.7 else []
    for _ in range(rng.randint(3, 30)):
        pieces.append(rng.choice(MAKERS)(rng))
    return number_markers(pieces)


def hostile_streams(seed: int, count: int) -> list[Stream]:
    """``count`` hostile streams, the same for the same seed."""
    rng = random.Random(seed)
    return [hostile_stream(rng) for _ in range(count)]
