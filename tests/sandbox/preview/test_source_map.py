"""Source maps: the Base64 VLQ decoder, the v3 lookup and mapping an error to its source."""

from __future__ import annotations

import base64
import json
import random

import pytest

from sandbox.preview.error_reports import PreviewError, SourceLocation
from sandbox.preview.source_map import (
    B64,
    SourceMap,
    SourceMaps,
    decode_vlq,
    inline_source_map,
    original_file,
)


def encode_vlq(values: list[int]) -> str:
    """The reference encoder (source map v3), to check the decoder against."""
    out = []
    for value in values:
        vlq = (-value << 1) | 1 if value < 0 else value << 1
        while True:
            digit = vlq & 31
            vlq >>= 5
            out.append(B64[digit | (32 if vlq else 0)])
            if not vlq:
                break
    return "".join(out)


@pytest.mark.parametrize(
    ("segment", "values"),
    [
        pytest.param("AAAA", [0, 0, 0, 0], id="zeros"),
        pytest.param("AAgBC", [0, 0, 16, 1], id="spec-example"),
        pytest.param("D", [-1], id="minus-one"),
        pytest.param("2H", [123], id="two-digits"),
        pytest.param("//////D", [-(2**31 - 1)], id="large-negative"),
    ],
)
def test_decode_vlq(segment: str, values: list[int]) -> None:
    assert decode_vlq(segment) == values


def test_decode_vlq_round_trips() -> None:
    rng = random.Random(23)
    for _ in range(500):
        values = [rng.randint(-(10**6), 10**6) for _ in range(rng.randint(1, 6))]
        assert decode_vlq(encode_vlq(values)) == values


@pytest.mark.parametrize("bad", [pytest.param("A!", id="char"), pytest.param("g", id="cut")])
def test_decode_vlq_refuses(bad: str) -> None:
    with pytest.raises(ValueError, match="VLQ"):
        decode_vlq(bad)


def a_map() -> str:
    # line 1: col 0 -> src 0 line 1 col 1; line 2: col 0 -> line 3 col 1, col 8 -> line 3 col 5;
    # line 3: col 2 -> src 1 line 10 col 3.
    lines = [
        encode_vlq([0, 0, 0, 0]),
        encode_vlq([0, 0, 2, 0]) + "," + encode_vlq([8, 0, 0, 4]),
        encode_vlq([2, 1, 7, -2]),
    ]
    return json.dumps(
        {"version": 3, "sources": ["App.jsx", "../lib/util.js"], "mappings": ";".join(lines)}
    )


@pytest.mark.parametrize(
    ("line", "column", "expected"),
    [
        pytest.param(1, 1, ("App.jsx", 1, 1), id="first"),
        pytest.param(2, 5, ("App.jsx", 3, 1), id="between-mappings"),
        pytest.param(2, 9, ("App.jsx", 3, 5), id="exact"),
        pytest.param(2, 50, ("App.jsx", 3, 5), id="after-last"),
        pytest.param(3, 1, ("../lib/util.js", 10, 3), id="before-first-of-line"),
        pytest.param(4, 1, None, id="no-such-line"),
    ],
)
def test_lookup(line: int, column: int, expected: tuple[str, int, int] | None) -> None:
    assert SourceMap.parse(a_map()).lookup(line, column) == expected


def test_inline_source_map() -> None:
    encoded = base64.b64encode(a_map().encode()).decode()
    module = f"const a = 1\n//# sourceMappingURL=data:application/json;base64,{encoded}\n"
    assert inline_source_map(module) == a_map()
    assert inline_source_map("const a = 1\n") is None
    assert inline_source_map("//# sourceMappingURL=data:application/json;base64,!!") is None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("App.jsx", "src/App.jsx", id="relative"),
        pytest.param("../lib/util.js", "lib/util.js", id="up"),
        pytest.param("/workspace/src/App.jsx", "src/App.jsx", id="sandbox-path"),
        pytest.param("../../../x.js", "src/App.jsx", id="outside"),
    ],
)
def test_original_file(source: str, expected: str) -> None:
    assert original_file("src/App.jsx", source) == expected


@pytest.mark.anyio
async def test_map_error_fetches_each_module_once() -> None:
    encoded = base64.b64encode(a_map().encode()).decode()
    fetched: list[str] = []

    async def fetch(file: str) -> str | None:
        fetched.append(file)
        return f"x\n//# sourceMappingURL=data:application/json;base64,{encoded}"

    maps = SourceMaps(fetch)
    error = PreviewError("uncaught", "boom", "", SourceLocation("src/App.jsx", 3, 4), "u")
    mapped = await maps.map_error(error)
    assert mapped.source == SourceLocation("lib/util.js", 10, 3)
    assert (await maps.map_error(error)).source == mapped.source
    assert fetched == ["src/App.jsx"]
    unmapped = error.with_source(SourceLocation("src/App.jsx", 99, 1))
    assert (await maps.map_error(unmapped)) == unmapped


@pytest.mark.anyio
async def test_no_map_leaves_the_error_alone() -> None:
    async def fetch(file: str) -> str | None:
        return None

    error = PreviewError("uncaught", "boom", "", SourceLocation("src/App.jsx", 3, 4), "u")
    assert await SourceMaps(fetch).map_error(error) == error
