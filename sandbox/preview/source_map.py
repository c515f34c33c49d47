"""Source mapping: a stack frame in a module Vite served, mapped to the original source line.

Vite's dev server transforms ``src/App.jsx`` (JSX, TypeScript) before the browser runs it, so a
browser's ``http://<id>.preview.<host>/src/App.jsx?t=1712:12:5`` names a line of the *served*
module. The module ends with an inline source map
(``//# sourceMappingURL=data:application/json;base64,...``); :class:`SourceMap` decodes its
``mappings`` (Base64 VLQ, source map v3) and :func:`map_error` moves a
:class:`~sandbox.preview.error_reports.PreviewError`'s ``source`` to the original file, line
and column. The module is fetched from the dev server with a size and time bound
(:class:`DevServerModules`), and each decoded map is kept for a few seconds per module URL (a
page reporting a burst of errors from one module decodes it once). Used by the preview's
error ingestion and by the render check.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
import re
import time
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from sandbox.preview.error_reports import PreviewError, SourceLocation, project_file

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
B64_VALUE = {char: index for index, char in enumerate(B64)}
VLQ_CONTINUATION = 32
VLQ_DATA = 31
INLINE_MAP = re.compile(
    r"//[#@] sourceMappingURL=data:application/json(?:;charset=[\w-]+)?;base64,"
    r"([A-Za-z0-9+/=]+)\s*$"
)
MAX_MODULE_BYTES = 8 * 1024 * 1024
FETCH_TIMEOUT = httpx.Timeout(5.0)
CACHE_SECONDS = 10.0
CACHE_ENTRIES = 64

# fetch(project path) -> the served module's text, or None when there is none.
FetchModule = Callable[[str], Awaitable[str | None]]


def decode_vlq(segment: str) -> list[int]:
    """The signed integers of one Base64 VLQ segment (``"AAgBC"`` -> ``[0, 0, 16, 1]``).

    Raises ValueError for a character outside Base64 or a value cut short.
    """
    values: list[int] = []
    value = shift = 0
    for char in segment:
        digit = B64_VALUE.get(char)
        if digit is None:
            raise ValueError(f"not a Base64 VLQ character: {char!r} in {segment!r}")
        value += (digit & VLQ_DATA) << shift
        if digit & VLQ_CONTINUATION:
            shift += 5
            continue
        values.append(-(value >> 1) if value & 1 else value >> 1)
        value = shift = 0
    if shift:
        raise ValueError(f"a Base64 VLQ value is cut short in {segment!r}")
    return values


@dataclass(frozen=True, slots=True)
class Mapping:
    """One mapped position: generated column (0-based) to source index, line, column."""

    column: int
    source: int
    line: int
    original_column: int


class SourceMap:
    """A decoded source map v3: per generated line, its mappings sorted by column."""

    def __init__(self, sources: list[str], lines: list[list[Mapping]]) -> None:
        """``lines[i]`` holds generated line ``i``'s mappings (0-based)."""
        self.sources = sources
        self.lines = lines

    @classmethod
    def parse(cls, text: str) -> SourceMap:
        """Decode a source map's JSON; ValueError if it is none."""
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("mappings"), str):
            raise ValueError("a source map needs a 'mappings' string")
        sources = [s if isinstance(s, str) else "" for s in data.get("sources") or []]
        root = data.get("sourceRoot")
        if isinstance(root, str) and root:
            sources = [posixpath.join(root, s) for s in sources]
        return cls(sources, decode_mappings(data["mappings"]))

    def lookup(self, line: int, column: int) -> tuple[str, int, int] | None:
        """The original ``(source, line, column)`` (1-based) of generated ``line``:``column``
        (1-based): the closest mapping at or before the column on that line."""
        if not 1 <= line <= len(self.lines):
            return None
        mappings = self.lines[line - 1]
        at = bisect_right([m.column for m in mappings], column - 1) - 1
        if at < 0:
            if not mappings:
                return None
            at = 0  # before the first mapping of the line: the line's first statement
        found = mappings[at]
        if not 0 <= found.source < len(self.sources):
            return None
        return self.sources[found.source], found.line + 1, found.original_column + 1


def decode_mappings(mappings: str) -> list[list[Mapping]]:
    """Source map v3 ``mappings`` decoded (fields relative as the format says)."""
    lines: list[list[Mapping]] = []
    source = line = original_column = 0
    for text in mappings.split(";"):
        column = 0
        found: list[Mapping] = []
        for segment in text.split(","):
            if not segment:
                continue
            fields = decode_vlq(segment)
            column += fields[0]
            if len(fields) < 4:
                continue  # a generated position with no source
            source += fields[1]
            line += fields[2]
            original_column += fields[3]
            found.append(Mapping(column, source, line, original_column))
        found.sort(key=lambda mapping: mapping.column)
        lines.append(found)
    return lines


def inline_source_map(module: str) -> str | None:
    """The JSON of a module's inline (base64 data URL) source map, or None."""
    match = INLINE_MAP.search(module[-MAX_MODULE_BYTES:])
    if match is None:
        return None
    try:
        return base64.b64decode(match[1], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def original_file(module_file: str, source: str) -> str:
    """The project path of a map's ``source`` for the module at ``module_file``.

    Vite names the source relative to the module (``App.jsx``) or by its path in the sandbox
    (``/workspace/src/App.jsx``); either way a project path comes back.
    """
    if source.startswith("/"):
        return project_file(source, "") or module_file
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(module_file), source))
    return module_file if joined.startswith("..") else joined


class SourceMaps:
    """Decoded maps per module URL, each kept ``seconds`` (edits change a module's map)."""

    def __init__(
        self,
        fetch: FetchModule,
        seconds: float = CACHE_SECONDS,
        entries: int = CACHE_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Fetch modules with ``fetch``; keep at most ``entries`` maps."""
        self.fetch = fetch
        self.seconds = seconds
        self.entries = entries
        self.clock = clock
        self._maps: OrderedDict[str, tuple[float, SourceMap | None]] = OrderedDict()

    async def for_module(self, file: str) -> SourceMap | None:
        """The source map of the served module ``file``, or None (none, or unreadable)."""
        now = self.clock()
        cached = self._maps.get(file)
        if cached is not None and now - cached[0] < self.seconds:
            return cached[1]
        found = await self._load(file)
        self._maps[file] = (now, found)
        self._maps.move_to_end(file)
        while len(self._maps) > self.entries:
            self._maps.popitem(last=False)
        return found

    async def _load(self, file: str) -> SourceMap | None:
        module = await self.fetch(file)
        text = inline_source_map(module) if module is not None else None
        if text is None:
            return None
        try:
            return SourceMap.parse(text)
        except (ValueError, TypeError, IndexError):
            return None

    async def map_error(self, error: PreviewError) -> PreviewError:
        """``error`` with its source moved to the original file/line/column (unchanged when
        there is no map or no mapping)."""
        if error.source is None:
            return error
        found = await self.for_module(error.source.file)
        position = found.lookup(error.source.line, error.source.column) if found else None
        if position is None:
            return error
        source, line, column = position
        file = original_file(error.source.file, source)
        return error.with_source(SourceLocation(file, line, column))


def dev_server_modules(
    client: httpx.AsyncClient, base_url: str, max_bytes: int = MAX_MODULE_BYTES
) -> FetchModule:
    """A :data:`FetchModule` reading served modules from the dev server at ``base_url``
    (at most ``max_bytes``, within :data:`FETCH_TIMEOUT`; None on any failure)."""

    async def fetch(file: str) -> str | None:
        url = httpx.URL(base_url).join("/" + file.lstrip("/"))
        chunks: list[bytes] = []
        size = 0
        try:
            async with client.stream("GET", url, timeout=FETCH_TIMEOUT) as response:
                if response.status_code != 200:
                    return None
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        return None
                    chunks.append(chunk)
        except httpx.HTTPError:
            return None
        return b"".join(chunks).decode("utf-8", "replace")

    return fetch
