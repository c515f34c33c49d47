"""Recognising the comments a model leaves where it skipped code.

Only comments are looked at (``//``, ``/* */``, JSX ``{/* */}``, ``<!-- -->``), never strings,
so ``placeholder="Your code here"`` is ordinary code. A comment is normalised first (JSDoc
stars and extra whitespace removed, lower case) and then matched against :data:`STUB_PATTERNS`.

Precision matters more than recall here: a false alarm sends a working app into a fix-up turn.
So each pattern needs a strong elision signal - a leading ellipsis with an elision word, a
phrase such as "rest of the code remains the same", or a whole comment that is nothing but a
stub ("your code here", "TODO: implement"). Ordinary notes are left alone: "TODO list item
component", "TODO: add dark mode", "Loading...", "implement debounce to spare the API",
"the logic here is subtle".
"""

from __future__ import annotations

import re

_ELLIPSIS = r"(?:\.{3,}|…)"
_CODE_WORDS = (
    r"(?:code|implementation|logic|styles|css|functions|methods|components|imports|handlers"
    r"|markup|jsx|html|routes|props)"
)
_WHATS_LEFT = r"(?:code|file|implementation|logic|styles|stylesheet|functions|methods|component)"

STUB_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("ellipsis", rf"^{_ELLIPSIS}$"),
        (
            "leading ellipsis",
            rf"^{_ELLIPSIS}\s*(?:the\s+)?(?:rest|remaining|existing|previous|other|same"
            r"|unchanged|omitted|etc)\b",
        ),
        (
            "trailing ellipsis",
            rf"^(?:the\s+)?(?:rest|remaining|existing|previous|other|same)\b.*\b{_CODE_WORDS}\b"
            rf".*{_ELLIPSIS}$",
        ),
        (
            "rest of the code",
            rf"\b(?:rest|remainder) of (?:the |your |this )?{_WHATS_LEFT}\b"
            rf"(?:\s*{_ELLIPSIS}?\s*$|.*\b(?:remains?|stays?|unchanged|same|omitted|here|goes"
            r"|as before|as is)\b)",
        ),
        (
            "unchanged",
            rf"\b(?:{_CODE_WORDS}|file|component|everything else|the rest)\s+(?:remains?|stays?"
            r"|is|are)\s+(?:the\s+)?(?:same|unchanged|as before|as is)\b",
        ),
        (
            "existing code",
            rf"^{_ELLIPSIS}?\s*(?:keep\s+|with\s+|plus\s+)?(?:the\s+|all\s+|your\s+)?(?:existing"
            r"|previous|original|other)\s+(?:code|implementation|logic)(?:\s+(?:here|goes here"
            rf"|unchanged|as is|as before|remains|stays))?\s*{_ELLIPSIS}?$",
        ),
        (
            "code here",
            rf"^{_ELLIPSIS}?\s*(?:todo:?\s*)?(?:add|insert|put|place|write|paste)?\s*(?:your"
            r"|the|more|additional|actual|real)?\s*(?:code|implementation|logic)\s+(?:goes\s+"
            r"|will\s+go\s+|would\s+go\s+)?here[.!:]*$",
        ),
        (
            "todo implement",
            r"^(?:todo|fixme)\s*[:\-]?\s*implement(?:\s+(?:this|me|it|here|later|(?:the|this)"
            r"\s+(?:function|component|logic|method|handler|feature)))?[.!]*$",
        ),
        ("implement me", r"^implement\s+(?:me|this|here|later)[.!]*$"),
        (
            "omitted for brevity",
            r"\b(?:omitted|elided|removed|skipped|truncated|shortened|abbreviated|left out)"
            r" for brevity\b",
        ),
    )
)
_JSDOC_STAR = re.compile(r"^\s*\*+ ?", re.MULTILINE)
_SPACE = re.compile(r"\s+")


def normalize_comment(text: str) -> str:
    """A comment's words in lower case: JSDoc stars and runs of whitespace collapsed."""
    without_stars = _JSDOC_STAR.sub(" ", text)
    return _SPACE.sub(" ", without_stars).strip().lower()


def stub_pattern(comment: str) -> str | None:
    """The name of the stub pattern ``comment`` (its text, without delimiters) matches, if any."""
    normalized = normalize_comment(comment)
    for name, pattern in STUB_PATTERNS:
        if pattern.search(normalized):
            return name
    return None
