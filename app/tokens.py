"""Counting tokens with tiktoken, offline.

Which encoding counts a model's tokens:

- OpenAI's current models (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, the o-series) use ``o200k_base``;
  the older gpt-4 / gpt-3.5 use ``cl100k_base``. These counts are exact for the text; the chat
  framing is estimated (see :data:`MESSAGE_OVERHEAD_TOKENS`).
- Anthropic (Claude) and Google (Gemini) do not publish tokenizers tiktoken can load, so kiln
  counts their text with ``cl100k_base`` as an **approximation**. It can be off by some percent
  either way; the output tokens reserved before every turn (``app.agent.budgets``) absorb that, and
  a provider's own "context too long" answer (``ContextTooLong``) remains the final word.
  Everything else (``replay``, unknown providers) is counted like Anthropic.

tiktoken downloads encodings on first use, and kiln may have no network for that: kiln ships
the two files it uses (``app/data/tiktoken``, named as tiktoken's cache names them: the SHA-1 of
the encoding's URL) and reads them from there unless ``TIKTOKEN_CACHE_DIR`` (or
``DATA_GYM_CACHE_DIR``) names another cache folder. Before tiktoken is
asked, kiln checks the file is there and intact, so a missing encoding gives a clear
:class:`~app.errors.ConfigError` naming the folder instead of a hang or a network error.
:func:`check_tokenizer` is what ``kiln doctor`` calls.

Two policies, on purpose, each named where it applies:

- **Budgets** (:class:`TokenCounter`): exact or nothing. A missing encoding raises, because a
  context-window check on a guess could send a request the model must refuse.
- **Pacing and estimates** (:func:`count_tokens`, :func:`split_tokens`): the replay provider
  cuts a recording into token-sized pieces and reports usage. It uses ``o200k_base`` when its
  file is cached, else an **approximation**: a "token" is up to four non-space characters with
  the whitespace before them (English averages about four characters a token). The fallback is
  logged once, so a reader of the log knows the counts are estimates.

Loading an encoding takes a moment and encoding is CPU work: call these from a worker thread
(``anyio.to_thread.run_sync``) when on the event loop.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import tiktoken

from app.errors import ConfigError

O200K = "o200k_base"
SHIPPED_ENCODINGS = Path(__file__).resolve().parent / "data" / "tiktoken"
_TIKTOKEN_ENV_LOCK = threading.Lock()
CL100K = "cl100k_base"
_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
# SHA-256 of each encoding file, as tiktoken itself checks them (tiktoken_ext.openai_public).
ENCODING_SHA256: Mapping[str, str] = {
    CL100K: "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    O200K: "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
_O200K_PREFIXES = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4")
_CL100K_OPENAI_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35")
OPENAI_PROVIDERS = frozenset({"openai", "azure-openai"})
# Chat framing per message (role, separators) and for priming the reply, as in OpenAI's
# published counting recipe; used for every provider as an estimate.
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3
# What one attached image costs, at most: Anthropic's ~1,600 for an image it does not shrink
# (OpenAI's high detail and Gemini's tiles cost less); a budget, never a bill.
IMAGE_TOKENS = 1_600
_APPROXIMATE_TOKEN = re.compile(r"\s*\S{1,4}|\s+")

log = logging.getLogger(__name__)


class MessageLike(Protocol):
    """A chat message (``app.providers`` ``Message`` fits)."""

    @property
    def role(self) -> str:
        """``user`` or ``assistant``."""

    @property
    def content(self) -> str:
        """The message text."""


def encoding_name_for(provider: str, model: str) -> str:
    """The tiktoken encoding that counts (or approximates) ``model``'s tokens; see module doc."""
    name = model.strip().lower()
    if provider.strip().lower() not in OPENAI_PROVIDERS:
        return CL100K
    if name.startswith("ft:"):
        name = name[3:]
    if name.startswith(_O200K_PREFIXES):
        return O200K
    if name.startswith(_CL100K_OPENAI_PREFIXES):
        return CL100K
    return O200K  # an OpenAI model newer than this table


def is_approximate(provider: str) -> bool:
    """Whether counts for ``provider`` are an approximation (no public tokenizer)."""
    return provider.strip().lower() not in OPENAI_PROVIDERS


def tiktoken_cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """The folder kiln loads encodings from: tiktoken's own variables when set ("" disables
    the cache), else the files shipped with kiln."""
    env = os.environ if environ is None else environ
    if "TIKTOKEN_CACHE_DIR" in env:
        return env["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in env:
        return env["DATA_GYM_CACHE_DIR"]
    return str(SHIPPED_ENCODINGS)


def cache_file_for(encoding: str, cache_dir: str) -> Path:
    """Where tiktoken keeps ``encoding`` inside ``cache_dir``."""
    key = hashlib.sha1(_BLOB_URL.format(name=encoding).encode()).hexdigest()
    return Path(cache_dir) / key


def verify_cached_encoding(encoding: str, cache_dir: str) -> Path:
    """Check ``encoding``'s file is in ``cache_dir`` and intact; return its path.

    Raises :class:`ConfigError` naming the folder and the expected file otherwise.
    """
    if encoding not in ENCODING_SHA256:
        raise ConfigError(f"kiln does not know the tiktoken encoding {encoding!r}")
    hint = (
        "set TIKTOKEN_CACHE_DIR to a folder holding tiktoken's cached encoding files,"
        " or unset it to use the files shipped with kiln"
    )
    if cache_dir == "":
        raise ConfigError(f"TIKTOKEN_CACHE_DIR is empty, which disables tiktoken's cache; {hint}")
    path = cache_file_for(encoding, cache_dir)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"tiktoken encoding {encoding!r} is not in the cache folder {cache_dir!r}"
            f" (expected the file {path.name!r}: {exc.strerror}); kiln cannot download it; {hint}"
        ) from exc
    if hashlib.sha256(data).hexdigest() != ENCODING_SHA256[encoding]:
        raise ConfigError(
            f"tiktoken encoding {encoding!r} in {cache_dir!r} is corrupt"
            f" (file {path.name!r} has the wrong checksum); replace it"
        )
    return path


@functools.cache
def _load_encoding(encoding: str, cache_dir: str) -> tiktoken.Encoding:
    """Load ``encoding`` after checking its cache file (cached per encoding and folder)."""
    verify_cached_encoding(encoding, cache_dir)
    try:
        with _tiktoken_cache(cache_dir):
            return tiktoken.get_encoding(encoding)
    except Exception as exc:  # tiktoken raises anything from ValueError to requests' errors
        raise ConfigError(
            f"tiktoken could not load {encoding!r} from {cache_dir!r}: {exc}"
        ) from exc


@contextlib.contextmanager
def _tiktoken_cache(cache_dir: str) -> Iterator[None]:
    """Point tiktoken at ``cache_dir`` while it loads: it reads the folder from the environment
    only. The previous value is put back; the lock keeps two loads from mixing them up."""
    with _TIKTOKEN_ENV_LOCK:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
        try:
            yield
        finally:
            if previous is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


def get_encoding(encoding: str) -> tiktoken.Encoding:
    """The tiktoken encoding ``encoding``, loaded offline from the cache folder."""
    return _load_encoding(encoding, tiktoken_cache_dir())


def check_tokenizer(encodings: Sequence[str] = (CL100K, O200K)) -> dict[str, Path]:
    """Load every encoding kiln uses; return each one's cache file. For ``kiln doctor``.

    Raises :class:`ConfigError` for the first one that is missing or corrupt.
    """
    cache_dir = tiktoken_cache_dir()
    found = {}
    for encoding in encodings:
        _load_encoding(encoding, cache_dir)
        found[encoding] = cache_file_for(encoding, cache_dir)
    return found


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts text and chat requests with one encoding."""

    encoding: tiktoken.Encoding
    approximate: bool = False

    @classmethod
    def for_model(cls, provider: str, model: str) -> TokenCounter:
        """The counter for ``provider``'s ``model`` (see the module doc for the choice)."""
        return cls(get_encoding(encoding_name_for(provider, model)), is_approximate(provider))

    def count(self, text: str) -> int:
        """Tokens in ``text``; special-token strings in it are counted as plain text."""
        return len(self.encoding.encode(text, disallowed_special=()))

    def count_message(self, message: MessageLike) -> int:
        """Tokens of one chat message, framing and attached images included."""
        images = len(getattr(message, "images", ()))  # a provider Message's; others have none
        return self.count(message.content) + MESSAGE_OVERHEAD_TOKENS + images * IMAGE_TOKENS

    def count_request(self, system: str, messages: Sequence[MessageLike]) -> int:
        """Tokens of a whole request: system prompt, every message and the reply priming."""
        system_tokens = self.count(system) + MESSAGE_OVERHEAD_TOKENS if system else 0
        total = sum(self.count_message(message) for message in messages)
        return system_tokens + total + REPLY_PRIMING_TOKENS


# Pacing and estimates: see the module docstring for why these may approximate.


def pacing_encoding() -> tiktoken.Encoding | None:
    """tiktoken's ``o200k_base`` if its file is cached locally, else ``None`` (never downloads).

    A missing file is not an error here, because pacing a replay needs only estimates; the
    fallback is logged once, so the approximation is never silent.
    """
    try:
        return get_encoding(O200K)
    except ConfigError as exc:
        _warn_estimating(str(exc))
        return None


@functools.cache
def _warn_estimating(reason: str) -> None:
    log.warning("replay token counts are estimates (about 4 characters a token): %s", reason)


def count_tokens(text: str) -> int:
    """How many tokens ``text`` is (tiktoken, or the approximation)."""
    enc = pacing_encoding()
    if enc is None:
        return len(_APPROXIMATE_TOKEN.findall(text))
    return len(enc.encode(text, disallowed_special=()))


def split_tokens(text: str, tokens_per_piece: int = 1) -> list[tuple[str, int]]:
    """``text`` cut into pieces of ``tokens_per_piece`` tokens: ``(piece, tokens in it)``.

    The pieces join back to exactly ``text``; a piece never splits a character (a token that
    ends inside a multi-byte character is kept with the next one).
    """
    if tokens_per_piece < 1:
        raise ValueError(f"tokens_per_piece must be positive, not {tokens_per_piece!r}")
    enc = pacing_encoding()
    if enc is None:
        tokens = _APPROXIMATE_TOKEN.findall(text)
        return [
            ("".join(tokens[i : i + tokens_per_piece]), len(tokens[i : i + tokens_per_piece]))
            for i in range(0, len(tokens), tokens_per_piece)
        ]
    pieces: list[tuple[str, int]] = []
    pending = b""
    count = 0
    for token in enc.encode(text, disallowed_special=()):
        pending += enc.decode_single_token_bytes(token)
        count += 1
        if count >= tokens_per_piece:
            try:
                pieces.append((pending.decode("utf-8"), count))
            except UnicodeDecodeError:
                continue  # mid-character: the next token completes it
            pending, count = b"", 0
    if pending:
        pieces.append((pending.decode("utf-8"), count))
    return pieces
