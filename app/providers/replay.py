"""The ``replay`` provider: plays a recorded answer as if a model were streaming it.

It is kiln's provider when no API key is configured, and the test double of every other layer.

**Which recording.** ``request.model`` names it: ``[a-z0-9][a-z0-9._-]*`` (at most 100
characters, no slashes, so a name can never reach outside the two places searched), looked up as
``NAME.txt``, ``NAME.jsonl`` or ``NAME.sse`` first in ``KILN_RECORDINGS_DIR`` (an operator's
recordings, which may override a demo) and then in the built-in demos (``app/demos``; the default
is ``todo-app``). An unknown or malformed name is refused (:class:`~app.errors.ModelRefused`).
An explicit file path is accepted only through the ``recording_file`` constructor argument (the
CLI's ``kiln run --recording FILE``); the model name is then ignored.

**Which turn.** Recordings are read with :func:`app.recordings.stream_formats.load_turns` (plain
text = one turn; JSONL ``{"turn": n, "text": ...}``; raw provider SSE captures). Turn *n* answers
the *n*-th request of a run, and *n* is taken from the request itself
(:attr:`~app.providers.base.ProviderRequest.turn`: the loop's turn number, which counts the
current run only, so every new message of a chat replays the recording from its first turn). The
provider thus keeps no state between requests and a resumed run gets the right turn. A request
past the recording's last turn gets an empty answer (finish reason ``stop``), which the agent
loop treats as "no output".

**Chunking and pacing.** By default the text is cut into real token-sized pieces
(:mod:`app.tokens`: tiktoken's ``o200k_base`` when its file is cached, else an
approximation of about four characters per token) of ``tokens_per_chunk`` tokens, sent at
``tokens_per_second`` (100, a realistic speed). ``chunking="recorded"`` keeps the recording's own
deltas instead. ``fast=True`` (tests) sends without waiting.

**Usage** is estimated with the same tokenizer: the system prompt and messages as input, the
delivered text as output.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import anyio

from app.errors import ConfigError, ModelRefused
from app.providers.base import (
    CancelSignal,
    FinishReason,
    ProviderRequest,
    ProviderStream,
    Sleep,
    StreamOutcome,
    Usage,
)
from app.providers.retry import RetryPolicy
from app.recordings.stream_formats import StreamFormatError, load_turns
from app.tokens import count_tokens, split_tokens

NAME = "replay"
BUILTIN_DEMOS = Path(__file__).resolve().parent.parent / "demos"
RECORDING_SUFFIXES = (".txt", ".jsonl", ".sse")
_RECORDING_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
# Per-message framing tokens providers add around each message (an estimate, like the rest).
_TOKENS_PER_MESSAGE = 3


@dataclass(frozen=True)
class ReplayPacing:
    """How a recording is cut and how fast it is sent."""

    chunking: Literal["tokens", "recorded"] = "tokens"
    tokens_per_chunk: int = 3
    tokens_per_second: float | None = 100.0  # None: send at once


class ReplayProvider:
    """Streams recorded answers; stateless between requests."""

    name = NAME

    def __init__(
        self,
        recordings_dir: Path | None = None,
        *,
        recording_file: Path | None = None,
        pacing: ReplayPacing | None = None,
        fast: bool = False,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        """Recordings by name from ``recordings_dir`` and the demos; else ``recording_file``."""
        self._dirs = tuple(d for d in (recordings_dir, BUILTIN_DEMOS) if d is not None)
        self._recording_file = recording_file
        pacing = pacing or ReplayPacing()
        self._pacing = replace(pacing, tokens_per_second=None) if fast else pacing
        self._sleep = sleep

    def stream(
        self, request: ProviderRequest, cancel: CancelSignal | None = None
    ) -> ProviderStream:
        """Stream turn ``request.turn`` of the recording ``request.model`` names."""
        if self._recording_file is None:
            check_recording_name(request.model)
        return ProviderStream(
            lambda outcome: self._attempt(request, outcome),
            provider=NAME,
            policy=RetryPolicy(max_attempts=1),  # nothing here is worth retrying
            cancel=cancel,
            sleep=self._sleep,
        )

    async def aclose(self) -> None:
        """Nothing to release."""

    async def _attempt(
        self, request: ProviderRequest, outcome: StreamOutcome
    ) -> AsyncGenerator[str, None]:
        path = self._recording_file or await self._find(request.model)
        chunks = await _load_turn(path, request.turn)
        pieces, input_tokens = await anyio.to_thread.run_sync(
            _prepare, request, chunks, self._pacing
        )
        outcome.usage = Usage(input_tokens, 0)
        delivered = 0
        for piece, tokens in pieces:
            if self._pacing.tokens_per_second:
                await self._sleep(tokens / self._pacing.tokens_per_second)
            delivered += tokens
            outcome.usage = Usage(input_tokens, delivered)
            yield piece
        outcome.finish_reason = FinishReason.STOP

    async def _find(self, name: str) -> Path:
        """The recording file called ``name`` (already checked), or :class:`ModelRefused`."""
        for folder in self._dirs:
            for suffix in RECORDING_SUFFIXES:
                candidate = folder / f"{name}{suffix}"
                if await anyio.Path(candidate).is_file():
                    return candidate
        known = await anyio.to_thread.run_sync(recording_names, self._dirs)
        raise ModelRefused(
            f"no recording named {name!r} (nor a model of a provider with a key); "
            f"recordings: {', '.join(known) or 'none'}"
        )


def check_recording_name(name: str) -> None:
    """Raise :class:`ModelRefused` unless ``name`` is a well-formed recording name."""
    if not _RECORDING_NAME.fullmatch(name):
        raise ModelRefused(
            f"{name!r} is not a recording name: lower-case letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, no slashes"
        )


def recording_names(folders: Sequence[Path]) -> list[str]:
    """The recording names found in ``folders`` (blocking: call from a thread)."""
    names = {
        path.stem
        for folder in folders
        if folder.is_dir()
        for path in folder.iterdir()
        if path.suffix in RECORDING_SUFFIXES and _RECORDING_NAME.fullmatch(path.stem)
    }
    return sorted(names)


async def _load_turn(path: Path, turn: int) -> list[str]:
    """The recorded deltas of answer number ``turn`` (empty past the last one)."""
    try:
        raw = await anyio.Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read recording {str(path)!r}: {exc}") from exc
    try:
        turns = load_turns(raw, path.name)
    except StreamFormatError as exc:
        raise ConfigError(f"recording {path.name!r} is unusable: {exc}") from exc
    for index, recorded in enumerate(turns, start=1):
        if (recorded.number if recorded.numbered else index) == turn:
            return recorded.chunks
    return []


def _prepare(
    request: ProviderRequest, chunks: list[str], pacing: ReplayPacing
) -> tuple[list[tuple[str, int]], int]:
    """The pieces to send with their token counts, and the estimated input tokens (CPU work)."""
    texts = [request.system, *(message.content for message in request.messages)]
    input_tokens = sum(count_tokens(text) for text in texts)
    input_tokens += _TOKENS_PER_MESSAGE * len(request.messages)
    if pacing.chunking == "recorded":
        pieces = [(chunk, count_tokens(chunk)) for chunk in chunks if chunk]
    else:
        pieces = split_tokens("".join(chunks), pacing.tokens_per_chunk)
    return pieces, input_tokens
