"""The adversarial corpus: hundreds of hostile streams, no crash, no silent loss, no escape.

Every stream of :mod:`tests.parser.corpus` is parsed whole, one character at a time and in
random chunks. The parser must not raise, must give the same events however the stream is
split, must account for every marker (lossless), and every file event must name a path inside
the workspace, judged here independently of ``parser.paths``.
"""

from __future__ import annotations

import posixpath
import random
import re
from collections import Counter

import pytest

from parser.events import Error, Event, FileContent, FileEnd, FileStart
from tests.parser.accounting import unaccounted
from tests.parser.corpus import hostile_streams
from tests.parser.test_stream import parse, split_at

SEED = 20261124
COUNT = 500
_UNWRITABLE = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff\\]")


def inside_workspace(path: str) -> bool:
    """Whether ``path`` is a relative POSIX path that stays in the workspace and fits Linux."""
    parts = path.split("/")
    return (
        bool(path)
        and not path.startswith("/")
        and posixpath.normpath(path) == path
        and ".." not in parts
        and not _UNWRITABLE.search(path)
        and len(path.encode()) <= 4096
        and all(0 < len(part.encode()) <= 255 for part in parts)
    )


def _random_cuts(text: str, rng: random.Random) -> list[int]:
    return [rng.randint(1, max(1, len(text))) for _ in range(rng.randint(1, 60))]


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, list[str]]]:
    return hostile_streams(SEED, COUNT)


def test_corpus_is_large_and_hostile(corpus: list[tuple[str, list[str]]]) -> None:
    """The corpus holds what it claims (so the checks below cannot pass on an empty one)."""
    text = "".join(stream for stream, _ in corpus)
    assert len(corpus) >= 500
    for needle in ("\x00", "\ud800", '<file path="../x">', "c" * 300, "<Thinking>" * 10, '"npm'):
        assert needle in text, needle
    assert sum(len(markers) for _, markers in corpus) > 2000


def test_hostile_streams_parse_without_loss_or_escape(
    corpus: list[tuple[str, list[str]]],
) -> None:
    rng = random.Random(SEED)
    codes: Counter[str] = Counter()
    for text, markers in corpus:
        whole = parse([text])
        assert parse(text) == whole, text[:200]
        assert parse(split_at(text, _random_cuts(text, rng))) == whole, text[:200]
        assert unaccounted(markers, whole) == [], text[:200]
        escaped = [
            e
            for e in whole
            if _file_path(e) is not None and not inside_workspace(_file_path(e) or "")
        ]
        assert escaped == [], text[:200]
        codes.update(e.code for e in whole if isinstance(e, Error))
    # Every kind of trouble was met and reported with its code.
    for code in ("malformed_tag", "invalid_file_path", "unclosed_tag"):
        assert codes[code] > 0, codes


def _file_path(event: Event) -> str | None:
    if isinstance(event, FileStart | FileContent | FileEnd):
        return event.path
    return None
