"""Token counts and token-sized pieces of text, with tiktoken when its encoding is on disk.

tiktoken cannot download encodings here, so it is used only when the ``o200k_base`` file is
already in its cache (``TIKTOKEN_CACHE_DIR``, as tiktoken itself names the file: the SHA-1 of the
encoding's URL); it is then loaded once per process. Without it, a cheap approximation is used
instead, documented where it applies: a "token" is up to four non-space characters together with
the whitespace before them (English text averages about four characters per token, so counts land
in the right range; they are estimates either way, as no provider's own tokenizer is available).

Loading the encoding takes a moment and encoding is CPU work: call these from a worker thread
(``anyio.to_thread.run_sync``) when on the event loop.
"""

from __future__ import annotations

import re

import tiktoken

from app.errors import ConfigError
from app.tokens import O200K, get_encoding

ENCODING_NAME = O200K
_APPROXIMATE_TOKEN = re.compile(r"\s*\S{1,4}|\s+")


def encoding() -> tiktoken.Encoding | None:
    """tiktoken's ``o200k_base`` if its file is cached locally, else ``None`` (never downloads).

    Loading and verifying the file is :mod:`app.tokens`'s job; a missing file is not an error
    here, because replaying a recording needs only estimates.
    """
    try:
        return get_encoding(ENCODING_NAME)
    except ConfigError:
        return None


def tokenizer_name() -> str:
    """``"tiktoken:o200k_base"`` or ``"approximate"``: which counting is in use."""
    return f"tiktoken:{ENCODING_NAME}" if encoding() else "approximate"


def count_tokens(text: str) -> int:
    """How many tokens ``text`` is (tiktoken, or the approximation)."""
    enc = encoding()
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
    enc = encoding()
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
