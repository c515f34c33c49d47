"""Just enough lexing of generated JS/TS, CSS and HTML to find imports and comments reliably.

Regular expressions over raw source see imports inside strings and comments, and "comments"
inside strings (``"https://..."``). :func:`scan_js` is a small one-pass lexer instead: it finds
comments, string and template literals (with ``${}`` nesting) and regular-expression literals,
and returns the source *masked* - comments and literal contents blanked, offsets and newlines
kept - plus each static string's content by the offset of its opening quote. Import patterns
then run on the masked text, so what they match is real code.

Two concessions to JSX, whose text is not JS: quoted strings end at a line end (an apostrophe in
``<p>Don't</p>`` blanks one line at most), and ``/`` right after ``<`` is a closing tag, not a
regular expression. Markdown fence lines are blanked before lexing, so a leftover fence does not
turn the rest of a file into a template literal.

CSS is lexed by the same rules (comments and strings only). HTML goes through the standard
library's ``html.parser``; inline module scripts are scanned as JS.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from parser.fences import FENCE_LINE

JS_EXTENSIONS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts")
CSS_EXTENSIONS = (".css",)
HTML_EXTENSIONS = (".html", ".htm")

# After these a ``/`` starts a regular expression; not after ``}`` (``<A b={c} />`` in JSX).
_REGEX_AFTER = frozenset("(,=:[!&|?{;+-*%<>~^")
_REGEX_AFTER_WORDS = frozenset(
    {"return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw"}
    | {"yield", "await", "instanceof"}
)
_IDENT = re.compile(r"[\w$]+")
_KEYWORD = r"(?<![\w$.])"
_STATIC_FROM = re.compile(
    rf"(?:^|(?<=;))[ \t]*{_KEYWORD}(?P<kw>import|export)\s+(?P<type>type\s+)?"
    r"(?:[\w$]+\s*,\s*)?(?:\{[^{}]*\}|\*(?:\s*as\s+[\w$]+)?|[\w$]+)\s*from\s*(?=['\"])",
    re.MULTILINE,
)
_SIDE_EFFECT = re.compile(rf"(?:^|(?<=;))[ \t]*{_KEYWORD}import\s*(?=['\"])", re.MULTILINE)
_CALL = re.compile(rf"{_KEYWORD}(?:import|require)\s*\(\s*(?=['\"])")
_CSS_IMPORT = re.compile(r"@import\s+(?:url\(\s*)?(?=['\"])")
_CSS_IMPORT_BARE_URL = re.compile(r"@import\s+url\(\s*(?P<url>[^'\"\s)]+)\s*\)")


@dataclass(frozen=True, slots=True)
class Comment:
    """A comment's text without its delimiters, and the line it starts on (1-based)."""

    text: str
    line: int


@dataclass(frozen=True, slots=True)
class ImportRef:
    """A module or file a source file refers to, and where."""

    specifier: str
    line: int
    kind: str  # import, export, side_effect, dynamic, css, script, stylesheet


@dataclass(slots=True)
class Scan:
    """What :func:`scan_js` found."""

    masked: str
    strings: dict[int, str] = field(default_factory=dict)  # quote offset -> content
    comments: list[Comment] = field(default_factory=list)
    newlines: list[int] = field(default_factory=list)  # offsets of the source's line breaks

    def line(self, offset: int) -> int:
        """The 1-based line of ``offset``."""
        return bisect.bisect_right(self.newlines, offset - 1) + 1


class _Lexer:
    """One pass over JS/TS(X) or CSS source; see the module doc."""

    def __init__(self, text: str, *, css: bool = False) -> None:
        self.text = text
        self.out = list(text)
        self.css = css
        self.scan = Scan(masked="", newlines=[i for i, char in enumerate(text) if char == "\n"])
        self.last = ""  # the last significant code character
        self.word = ""  # the identifier that ends at ``last``, if any
        self.templates: list[int] = []  # brace depth at each open ``${``
        self.depth = 0

    def blank(self, start: int, end: int) -> None:
        """Mask ``text[start:end]``, keeping line breaks."""
        for index in range(start, end):
            if self.out[index] != "\n":
                self.out[index] = " "

    def run(self) -> Scan:
        """Lex the whole text."""
        i, n = 0, len(self.text)
        while i < n:
            i = self.step(i, self.text[i], self.text[i + 1 : i + 2])
        self.scan.masked = "".join(self.out)
        return self.scan

    def step(self, i: int, char: str, following: str) -> int:
        """Consume one token or character at ``i``; return where the next one starts."""
        if char == "/" and following == "/" and not self.css:
            return self.line_comment(i)
        if char == "/" and following == "*":
            return self.block_comment(i)
        if char in "'\"":
            return self.quoted(i, char)
        if char == "`" and not self.css:
            return self.template(i + 1, i)
        if char == "/" and self.regex_allowed(i):
            return self.regex(i)
        if char == "}" and self.templates and self.templates[-1] == self.depth:
            self.templates.pop()
            return self.template(i + 1, None)
        return self.code(i, char)

    def code(self, i: int, char: str) -> int:
        """Plain code: remember the last significant character and identifier, count braces."""
        if char.isspace():
            return i + 1
        match = _IDENT.match(self.text, i)
        if match:
            self.word, self.last = match.group(), match.group()[-1]
            return match.end()
        self.depth += {"{": 1, "}": -1}.get(char, 0)
        self.word, self.last = "", char
        return i + 1

    def regex_allowed(self, i: int) -> bool:
        """Whether a ``/`` at ``i`` starts a regular expression (rather than dividing)."""
        if self.css or (i > 0 and self.text[i - 1] == "<"):
            return False  # CSS has no regexes; ``</`` closes a JSX element
        if self.word:
            return self.word in _REGEX_AFTER_WORDS
        return self.last == "" or self.last in _REGEX_AFTER

    def line_comment(self, i: int) -> int:
        """A ``//`` comment, to the end of its line."""
        end = self.text.find("\n", i)
        end = len(self.text) if end < 0 else end
        self.scan.comments.append(Comment(self.text[i + 2 : end], self.scan.line(i)))
        self.blank(i, end)
        return end

    def block_comment(self, i: int) -> int:
        """A ``/* */`` comment (an unclosed one runs to the end)."""
        close = self.text.find("*/", i + 2)
        end = len(self.text) if close < 0 else close + 2
        body = self.text[i + 2 : close if close >= 0 else end]
        self.scan.comments.append(Comment(body, self.scan.line(i)))
        self.blank(i, end)
        return end

    def quoted(self, i: int, quote: str) -> int:
        """A quoted string; it ends at its quote or at the end of the line (see module doc)."""
        j, n = i + 1, len(self.text)
        while j < n and self.text[j] not in (quote, "\n"):
            j += 2 if self.text[j] == "\\" else 1
        j = min(j, n)
        self.scan.strings[i] = self.text[i + 1 : j]
        self.blank(i + 1, j)
        self.word, self.last = "", quote
        return j + 1 if j < n and self.text[j] == quote else j

    def template(self, j: int, opening: int | None) -> int:
        """Scan template text from ``j`` to the closing backtick or the next ``${``."""
        start, n = j, len(self.text)
        while j < n and self.text[j] != "`" and not self.text.startswith("${", j):
            j += 2 if self.text[j] == "\\" else 1
        j = min(j, n)
        self.blank(start, j)
        self.word, self.last = "", "`"
        if j < n and self.text[j] == "$":
            self.templates.append(self.depth)
            return j + 2
        if opening is not None:  # a template without substitutions is a static string
            self.scan.strings[opening] = self.text[start:j]
        return j + 1

    def regex(self, i: int) -> int:
        """A regular-expression literal, to its closing ``/`` outside a class, within a line."""
        j, n, in_class = i + 1, len(self.text), False
        while j < n and self.text[j] != "\n":
            char = self.text[j]
            if char == "\\":
                j += 2
                continue
            if char == "/" and not in_class:
                break
            in_class = (in_class or char == "[") and char != "]"
            j += 1
        self.blank(i + 1, min(j, n))
        self.word, self.last = "", "/"
        return j + 1


def blank_fences(text: str) -> str:
    """``text`` with every line that is only a markdown fence replaced by spaces."""
    return FENCE_LINE.sub(lambda match: " " * len(match.group()), text)


def scan_js(text: str) -> Scan:
    """Lex JS/TS/JSX source (see the module doc)."""
    return _Lexer(blank_fences(text)).run()


def scan_css(text: str) -> Scan:
    """Lex CSS: comments and strings only."""
    return _Lexer(blank_fences(text), css=True).run()


def js_imports(text: str, first_line: int = 1) -> tuple[list[ImportRef], list[Comment]]:
    """The static imports, re-exports, side-effect imports, ``import()`` and ``require()`` calls
    with a literal specifier, and the comments of JS/TS source. ``import type`` is skipped: it
    is erased before anything is resolved.
    """
    scan = scan_js(text)
    shift = first_line - 1
    refs: list[ImportRef] = []
    for match in _STATIC_FROM.finditer(scan.masked):
        if match.group("type") is None:
            refs.append(_ref(scan, match.end(), match.group("kw"), shift))
    for pattern, kind in ((_SIDE_EFFECT, "side_effect"), (_CALL, "dynamic")):
        refs.extend(_ref(scan, match.end(), kind, shift) for match in pattern.finditer(scan.masked))
    comments = [Comment(c.text, c.line + shift) for c in scan.comments]
    return sorted(refs, key=lambda ref: ref.line), comments


def css_imports(text: str) -> tuple[list[ImportRef], list[Comment]]:
    """The ``@import`` targets and the comments of a stylesheet."""
    scan = scan_css(text)
    refs = [_ref(scan, match.end(), "css") for match in _CSS_IMPORT.finditer(scan.masked)]
    for match in _CSS_IMPORT_BARE_URL.finditer(scan.masked):
        refs.append(ImportRef(match.group("url"), scan.line(match.start()), "css"))
    return refs, scan.comments


def _ref(scan: Scan, quote_at: int, kind: str, shift: int = 0) -> ImportRef:
    """The reference whose specifier is the string opening at ``quote_at``."""
    return ImportRef(scan.strings.get(quote_at, ""), scan.line(quote_at) + shift, kind)


class _HtmlScanner(HTMLParser):
    """Collects an HTML file's local script and stylesheet references, comments and scripts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[ImportRef] = []
        self.comments: list[Comment] = []
        self._inline_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Record ``<script src>`` and stylesheet links; note inline scripts."""
        values = {name.lower(): value or "" for name, value in attrs}
        line = self.getpos()[0]
        if tag == "script" and values.get("src"):
            self.refs.append(ImportRef(values["src"], line, "script"))
        elif tag == "script" and values.get("type", "module") in ("module", "text/javascript", ""):
            self._inline_script = True
        rel = values.get("rel", "").lower().split()
        if tag == "link" and values.get("href") and {"stylesheet", "modulepreload"} & set(rel):
            self.refs.append(ImportRef(values["href"], line, "stylesheet"))

    def handle_endtag(self, tag: str) -> None:
        """Leave an inline script."""
        if tag == "script":
            self._inline_script = False

    def handle_data(self, data: str) -> None:
        """Scan an inline script's code as JS."""
        if self._inline_script and data.strip():
            refs, comments = js_imports(data, self.getpos()[0])
            self.refs.extend(refs)
            self.comments.extend(comments)

    def handle_comment(self, data: str) -> None:
        """Keep HTML comments for the placeholder check."""
        self.comments.append(Comment(data, self.getpos()[0]))


def html_imports(text: str) -> tuple[list[ImportRef], list[Comment]]:
    """The local scripts, stylesheets and inline-script imports of an HTML page, and its
    comments (HTML comments and those of inline scripts)."""
    scanner = _HtmlScanner()
    scanner.feed(text)
    scanner.close()
    return scanner.refs, scanner.comments


def imports_and_comments(path: str, text: str) -> tuple[list[ImportRef], list[Comment]] | None:
    """Dispatch on the file's extension; ``None`` for a file kiln does not scan."""
    lower = path.lower()
    if lower.endswith(JS_EXTENSIONS):
        return js_imports(text)
    if lower.endswith(CSS_EXTENSIONS):
        return css_imports(text)
    if lower.endswith(HTML_EXTENSIONS):
        return html_imports(text)
    return None
